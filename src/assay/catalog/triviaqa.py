"""TriviaQA (Joshi et al. 2017): open-domain trivia questions answered without evidence.

`triviaqa` follows lm-eval 0.4.13: "Question: ...?\\nAnswer:", greedy generation cut at the
first newline, period or comma, whitespace stripped, then exact_match (case and punctuation
ignored) against any of the answer's aliases. Zero-shot by default; few-shot examples come from
train and show the first alias. Dataset `mandarjoshi/trivia_qa`, subset `rc.nocontext`,
validation split; lm-eval pins no revision.
"""

from __future__ import annotations

from typing import Any

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, generation_doc
from assay.doc import Doc, OutputType
from assay.tasks.config import MetricSpec, TaskConfig

SHORT_ANSWER_STOPS = ["\n", ".", ","]
"""Short-answer generation stops at the first newline, period or comma."""

STRIP_FILTERS: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = [
    ("remove_whitespace", [("remove_whitespace", {}), ("take_first", {})])
]
"""The filter pipeline of lm-eval's short-answer QA tasks."""


def triviaqa_prompt(row: Row, task_name: str) -> Doc:
    """Question with a question mark; every alias is an accepted answer."""
    return generation_doc(f"Question: {row['question']}?\nAnswer:", list(row["answer"]["aliases"]))


TASKS_TABLE = [
    TaskConfig(
        name="triviaqa",
        prompt_function=triviaqa_prompt,
        hf_repo="mandarjoshi/trivia_qa",
        hf_subset="rc.nocontext",
        metrics=[
            MetricSpec(
                "exact_match",
                kwargs={"ignore_case": True, "ignore_punctuation": True},
                aggregation="mean",
                higher_is_better=True,
            )
        ],
        evaluation_splits=("validation",),
        few_shots_split="train",
        # lm-eval sets neither fewshot_split nor test_split here, which its sampler treats
        # as "few-shot pool = eval split": it draws one example more and drops the doc itself.
        fewshot_drop_equal=True,
        output_type=OutputType.GENERATE_UNTIL,
        generation_kwargs={"until": SHORT_ANSWER_STOPS, "do_sample": False, "temperature": 0.0},
        filters=STRIP_FILTERS,
        version=3.0,
        example_rows=[
            {
                "question": "Which planet is known as the Red Planet",
                "question_id": "example_1",
                "answer": {"aliases": ["Mars", "Planet Mars"], "value": "Mars"},
            }
        ],
        **LM_EVAL_DEFAULTS,
    )
]
