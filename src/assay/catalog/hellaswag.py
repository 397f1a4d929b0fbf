"""HellaSwag (Zellers et al. 2019): pick the most plausible ending of an everyday scene.

`hellaswag` follows lm-eval 0.4.13: the activity label and context, cleaned of WikiHow's
bracketed markers, scored against each of the four cleaned endings (acc, acc_norm); validation
split, few-shot examples drawn from train. Dataset `Rowan/hellaswag`; lm-eval pins no revision.
"""

from __future__ import annotations

import re

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, choice_doc, map_rows
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig

_BRACKETED = re.compile(r"\[.*?\]")


def clean(text: str) -> str:
    """Strip, turn " [title]" into a sentence break, drop other [markers], squeeze one double
    space (a single pass, as lm-eval does)."""
    text = text.strip().replace(" [title]", ". ")
    return _BRACKETED.sub("", text).replace("  ", " ")


def _processed_fields(row: Row) -> Row:
    """query, choices and gold added to each row."""
    context = row["ctx_a"] + " " + row["ctx_b"].capitalize()
    return {
        "query": clean(row["activity_label"] + ": " + context),
        "choices": [clean(ending) for ending in row["endings"]],
        "gold": int(row["label"]),
    }


def hellaswag_prompt(row: Row, task_name: str) -> Doc:
    """The cleaned context, each cleaned ending as a continuation."""
    return choice_doc(row["query"], row["choices"], int(row["label"]), target=row["label"])


_EXAMPLES = [
    {
        "ind": 4,
        "activity_label": "Removing ice from car",
        "ctx_a": "Then, the man writes over the snow covering the window of a car.",
        "ctx_b": "then",
        "ctx": "Then, the man writes over the snow covering the window of a car. then",
        "endings": [
            ", the man adds wax to the windshield and cuts it.",
            ", a person board a ski lift, while two men supporting the head of the person.",
            ", the man puts on a christmas coat, knitted with netting.",
            ", the man continues removing the snow on his car.",
        ],
        "source_id": "activitynet~v_-1IBHYS3L-Y",
        "split": "train",
        "split_type": "indomain",
        "label": "3",
    }
]

TASKS_TABLE = [
    TaskConfig(
        name="hellaswag",
        prompt_function=hellaswag_prompt,
        hf_repo="Rowan/hellaswag",
        metrics=["acc", "acc_norm"],
        hf_avail_splits=("train", "validation"),
        evaluation_splits=("validation",),
        few_shots_split="train",
        fewshot_drop_equal=True,  # lm-eval: no test split, so its sampler drops the doc
        process_docs=map_rows(_processed_fields),
        output_type=OutputType.MULTIPLE_CHOICE,
        tags=["multiple_choice"],
        version=1.0,
        example_rows=_EXAMPLES,
        **LM_EVAL_DEFAULTS,
    )
]
