"""OpenBookQA (Mihaylov et al. 2018): elementary science questions needing an open-book fact.

`openbookqa` follows lm-eval 0.4.13: the bare question stem, scored against each answer text
(acc, acc_norm); test split, few-shot examples drawn from train.
Dataset `allenai/openbookqa` (subset main); lm-eval pins no revision.
"""

from __future__ import annotations

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, choice_doc
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig


def openbookqa_prompt(row: Row, task_name: str) -> Doc:
    """The stem, each answer text as a continuation; gold is the answerKey's position (some
    keys carry stray leading spaces)."""
    gold = row["choices"]["label"].index(row["answerKey"].lstrip())
    return choice_doc(row["question_stem"], row["choices"]["text"], gold)


_EXAMPLES = [
    {
        "id": "7-980",
        "question_stem": "The sun is responsible for",
        "choices": {
            "text": [
                "puppies learning new tricks",
                "children growing up and getting old",
                "flowers wilting in a vase",
                "plants sprouting, blooming and wilting",
            ],
            "label": ["A", "B", "C", "D"],
        },
        "answerKey": "D",
    }
]

TASKS_TABLE = [
    TaskConfig(
        name="openbookqa",
        prompt_function=openbookqa_prompt,
        hf_repo="allenai/openbookqa",
        hf_subset="main",
        metrics=["acc", "acc_norm"],
        evaluation_splits=("test",),
        few_shots_split="train",
        output_type=OutputType.MULTIPLE_CHOICE,
        version=1.0,
        example_rows=_EXAMPLES,
        **LM_EVAL_DEFAULTS,
    )
]
