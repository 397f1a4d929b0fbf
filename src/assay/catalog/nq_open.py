"""Natural Questions, open-domain version (Lee et al. 2019): real search questions, short answers.

`nq_open` follows lm-eval 0.4.13: the description "Answer these questions:\\n\\n", then
"Q: ...?\\nA:" (few-shot examples separated by a single newline), greedy generation cut at the
first newline, period or comma, whitespace stripped, and exact_match against any listed answer
ignoring case, punctuation and leading articles. Zero-shot by default; few-shot examples come
from train. Dataset `google-research-datasets/nq_open`, validation split; lm-eval pins no
revision.
"""

from __future__ import annotations

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, generation_doc
from assay.catalog.triviaqa import SHORT_ANSWER_STOPS, STRIP_FILTERS
from assay.doc import Doc, OutputType
from assay.tasks.config import MetricSpec, TaskConfig

DESCRIPTION = "Answer these questions:\n\n"


def nq_open_prompt(row: Row, task_name: str) -> Doc:
    """Question with a question mark; every listed answer is accepted."""
    return generation_doc(
        f"Q: {row['question']}?\nA:", list(row["answer"]), instruction=DESCRIPTION
    )


TASKS_TABLE = [
    TaskConfig(
        name="nq_open",
        prompt_function=nq_open_prompt,
        hf_repo="google-research-datasets/nq_open",
        metrics=[
            MetricSpec(
                "exact_match",
                kwargs={
                    "ignore_case": True,
                    "ignore_punctuation": True,
                    "regexes_to_ignore": ["\\b(?:The |the |An |A |The |a |an )"],
                },
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
        fewshot_delimiter="\n",
        generation_kwargs={"until": SHORT_ANSWER_STOPS, "do_sample": False, "temperature": 0.0},
        filters=STRIP_FILTERS,
        version=4.0,
        example_rows=[{"question": "who painted the mona lisa", "answer": ["Leonardo da Vinci"]}],
        **LM_EVAL_DEFAULTS,
    )
]
