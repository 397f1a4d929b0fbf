"""PIQA (Bisk et al. 2020): physical commonsense, pick the better of two solutions to a goal.

`piqa` follows lm-eval 0.4.13: "Question: <goal>\\nAnswer:" scored against both solutions (acc,
acc_norm); validation split, few-shot examples drawn from train.
Dataset `baber/piqa` (lm-eval's parquet copy of the original); lm-eval pins no revision.
"""

from __future__ import annotations

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, choice_doc
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig


def piqa_prompt(row: Row, task_name: str) -> Doc:
    """The goal as a question, each solution as a continuation."""
    return choice_doc(f"Question: {row['goal']}\nAnswer:", [row["sol1"], row["sol2"]], row["label"])


_EXAMPLES = [
    {
        "goal": "When boiling butter, when it's ready, you can",
        "sol1": "Pour it onto a plate",
        "sol2": "Pour it into a jar",
        "label": 1,
    }
]

TASKS_TABLE = [
    TaskConfig(
        name="piqa",
        prompt_function=piqa_prompt,
        hf_repo="baber/piqa",
        metrics=["acc", "acc_norm"],
        hf_avail_splits=("train", "validation"),
        evaluation_splits=("validation",),
        few_shots_split="train",
        fewshot_drop_equal=True,  # lm-eval: no test split, so its sampler drops the doc
        output_type=OutputType.MULTIPLE_CHOICE,
        version=1.0,
        example_rows=_EXAMPLES,
        **LM_EVAL_DEFAULTS,
    )
]
