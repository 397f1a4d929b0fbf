"""WinoGrande (Sakaguchi et al. 2019): fill the blank of a sentence with one of two names.

`winogrande` follows lm-eval 0.4.13's partial scoring: each option is put into the sentence up
to the blank, giving two contexts, and the log-likelihood of the rest of the sentence after each
context decides (acc). Validation split, few-shot examples drawn from train.
Dataset `allenai/winogrande` (subset winogrande_xl); lm-eval pins no revision.
"""

from __future__ import annotations

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, multiple_input_doc
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig


def winogrande_prompt(row: Row, task_name: str) -> Doc:
    """Contexts "sentence up to the blank + option"; the shared continuation is what follows
    the blank, stripped."""
    blank = row["sentence"].index("_")
    before = row["sentence"][:blank]
    contexts = [before + row["option1"], before + row["option2"]]
    rest = row["sentence"][blank + 1 :].strip()
    return multiple_input_doc(contexts, int(row["answer"]) - 1, rest)


_EXAMPLES = [
    {
        "sentence": "Sarah was a much better surgeon than Maria so _ always got the easier cases.",
        "option1": "Sarah",
        "option2": "Maria",
        "answer": "2",
    }
]

TASKS_TABLE = [
    TaskConfig(
        name="winogrande",
        prompt_function=winogrande_prompt,
        hf_repo="allenai/winogrande",
        hf_subset="winogrande_xl",
        metrics=["acc"],
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
