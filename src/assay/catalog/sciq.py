"""SciQ (Welbl et al. 2017): crowd-sourced science exam questions with a supporting paragraph.

`sciq` follows lm-eval 0.4.13: "<support>\\nQuestion: <question>\\nAnswer:" scored against the
three distractors and the correct answer, always last (acc, acc_norm); test split, few-shot
examples drawn from train. Dataset `allenai/sciq`; lm-eval pins no revision.
"""

from __future__ import annotations

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, choice_doc
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig


def sciq_prompt(row: Row, task_name: str) -> Doc:
    """Support paragraph and question; choices are distractor1-3 then the correct answer."""
    query = f"{row['support'].lstrip()}\nQuestion: {row['question']}\nAnswer:"
    choices = [row["distractor1"], row["distractor2"], row["distractor3"], row["correct_answer"]]
    return choice_doc(query, choices, 3)


_EXAMPLES = [
    {
        "question": "What type of organism is commonly used in preparation of foods such as "
        "cheese and yogurt?",
        "distractor3": "viruses",
        "distractor1": "protozoa",
        "distractor2": "gymnosperms",
        "correct_answer": "mesophilic organisms",
        "support": "Mesophiles grow best in moderate temperature, typically between 25 and 40 "
        "degrees C. They are used in the preparation of foods such as cheese and yogurt.",
    }
]

TASKS_TABLE = [
    TaskConfig(
        name="sciq",
        prompt_function=sciq_prompt,
        hf_repo="allenai/sciq",
        metrics=["acc", "acc_norm"],
        evaluation_splits=("test",),
        few_shots_split="train",
        output_type=OutputType.MULTIPLE_CHOICE,
        version=1.0,
        example_rows=_EXAMPLES,
        **LM_EVAL_DEFAULTS,
    )
]
