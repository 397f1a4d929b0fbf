"""BIG-Bench Hard (Suzgun et al. 2022): 27 hard BIG-Bench tasks, chain-of-thought, three shots.

Each subset is a task `bbh_cot_fewshot_<subset>` as in lm-eval 0.4.13: the subset's
description, then its three fixed chain-of-thought exemplars ("Q: ...\\nA: Let's think step by
step.\\n" followed by the worked answer ending in "So the answer is X."), greedy generation up
to 1024 tokens stopping at "Q" or a blank line, and exact_match of the text after "the answer
is " (filter `get-answer`) against the target. The groups `bbh` and `bbh_cot_fewshot` report
exact_match averaged over subsets weighted by size. The exemplars are bundled
(`assay/data/bbh/cot_fewshot.json`, from the BBH repository's cot-prompts).
Dataset `SaylorTwift/bbh` (one subset per task, test split); lm-eval pins no revision.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, generation_doc
from assay.doc import Doc, OutputType
from assay.tasks.config import MetricSpec, TaskConfig
from assay.tasks.lm_eval_yaml import GroupConfig


@cache
def cot_prompts() -> dict[str, dict[str, Any]]:
    """Per subset: its `description` and three exemplars (`samples`, with input and target)."""
    text = resources.files("assay.data.bbh").joinpath("cot_fewshot.json").read_text("utf-8")
    return json.loads(text)


SUBSETS = [
    "boolean_expressions", "causal_judgement", "date_understanding", "disambiguation_qa",
    "dyck_languages", "formal_fallacies", "geometric_shapes", "hyperbaton",
    "logical_deduction_five_objects", "logical_deduction_seven_objects",
    "logical_deduction_three_objects", "movie_recommendation", "multistep_arithmetic_two",
    "navigate", "object_counting", "penguins_in_a_table", "reasoning_about_colored_objects",
    "ruin_names", "salient_translation_error_detection", "snarks", "sports_understanding",
    "temporal_sequences", "tracking_shuffled_objects_five_objects",
    "tracking_shuffled_objects_seven_objects", "tracking_shuffled_objects_three_objects",
    "web_of_lies", "word_sorting",
]  # fmt: skip
"""The 27 BBH subsets, in lm-eval's group order."""


def _prompt_for(subset: str):
    def bbh_prompt(row: Row, task_name: str) -> Doc:
        """Question with the step-by-step cue; the target (or exemplar answer) follows."""
        return generation_doc(
            f"Q: {row['input']}\nA: Let's think step by step.\n",
            row["target"],
            instruction=cot_prompts()[subset]["description"],
        )

    return bbh_prompt


def _samples_for(subset: str):
    def samples() -> list[Row]:
        return list(cot_prompts()[subset]["samples"])

    return samples


def _subset_task(subset: str) -> TaskConfig:
    return TaskConfig(
        name=f"bbh_cot_fewshot_{subset}",
        prompt_function=_prompt_for(subset),
        hf_repo="SaylorTwift/bbh",
        hf_subset=subset,
        metrics=[MetricSpec("exact_match", aggregation="mean", higher_is_better=True)],
        evaluation_splits=("test",),
        fewshot_samples=_samples_for(subset),
        few_shots_select="first_n",
        num_fewshots=3,
        output_type=OutputType.GENERATE_UNTIL,
        target_delimiter="",
        generation_kwargs={
            "max_gen_toks": 1024,
            "until": ["</s>", "Q", "\n\n"],
            "do_sample": False,
            "temperature": 0.0,
        },
        filters=[
            (
                "get-answer",
                [("regex", {"regex_pattern": "(?<=the answer is )(.*)(?=.)"}), ("take_first", {})],
            )
        ],
        version=4.0,
        example_rows=[{"input": "not ( True and False ) is", "target": "True"}],
        **LM_EVAL_DEFAULTS,
    )


TASKS_TABLE = [_subset_task(subset) for subset in SUBSETS]

_EXACT_MATCH_BY_SIZE = [
    {"metric": "exact_match", "aggregation": "mean", "weight_by_size": True,
     "filter_list": "get-answer"}
]  # fmt: skip

GROUPS = [
    GroupConfig(
        name=name,
        tasks=[f"bbh_cot_fewshot_{subset}" for subset in SUBSETS],
        aggregate_metric_list=_EXACT_MATCH_BY_SIZE,
        version=3.0,
    )
    for name in ("bbh", "bbh_cot_fewshot")
]
