"""BoolQ (Clark et al. 2019): yes/no questions about a Wikipedia passage.

`boolq` follows lm-eval 0.4.13 (SuperGLUE version): "<passage>\\nQuestion: <question>?\\nAnswer:"
scored against " no" and " yes" (acc); validation split, few-shot examples drawn from train.
Dataset `aps/super_glue` (subset boolq); lm-eval pins no revision.
"""

from __future__ import annotations

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, choice_doc
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig


def boolq_prompt(row: Row, task_name: str) -> Doc:
    """Passage and question; label 1 is "yes"."""
    query = f"{row['passage']}\nQuestion: {row['question']}?\nAnswer:"
    return choice_doc(query, ["no", "yes"], row["label"])


_EXAMPLES = [
    {
        "question": "is windows movie maker part of windows essentials",
        "passage": "Windows Movie Maker is a discontinued video editing software by Microsoft. "
        "It was a part of Windows Essentials software suite.",
        "idx": 0,
        "label": 1,
    }
]

TASKS_TABLE = [
    TaskConfig(
        name="boolq",
        prompt_function=boolq_prompt,
        hf_repo="aps/super_glue",
        hf_subset="boolq",
        metrics=["acc"],
        evaluation_splits=("validation",),
        few_shots_split="train",
        fewshot_drop_equal=True,  # lm-eval: no test split, so its sampler drops the doc
        output_type=OutputType.MULTIPLE_CHOICE,
        tags=["super-glue-lm-eval-v1"],
        version=2.0,
        example_rows=_EXAMPLES,
        **LM_EVAL_DEFAULTS,
    )
]
