"""Social IQa (Sap et al. 2019): commonsense about people's motives, reactions and feelings.

The task is `social_iqa`, as lm-eval 0.4.13 names it (the tag `siqa`, its folder's name, runs it
too): "Q: <context> <question>\\nA:" scored
against the three answers (acc); validation split, few-shot examples drawn from train.
Dataset `lighteval/siqa`; lm-eval pins no revision.
"""

from __future__ import annotations

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, choice_doc
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig


def siqa_prompt(row: Row, task_name: str) -> Doc:
    """Context and question, each answer as a continuation; the label counts from 1."""
    answers = [row["answerA"], row["answerB"], row["answerC"]]
    return choice_doc(f"Q: {row['context']} {row['question']}\nA:", answers, int(row["label"]) - 1)


_EXAMPLES = [
    {
        "context": "Cameron decided to have a barbecue and gathered her friends together.",
        "question": "How would Others feel as a result?",
        "answerA": "like attending",
        "answerB": "like staying home",
        "answerC": "a good friend to have",
        "label": "1",
    }
]

TASKS_TABLE = [
    TaskConfig(
        name="social_iqa",
        prompt_function=siqa_prompt,
        hf_repo="lighteval/siqa",
        metrics=["acc"],
        hf_avail_splits=("train", "validation"),
        evaluation_splits=("validation",),
        few_shots_split="train",
        fewshot_drop_equal=True,  # lm-eval: no test split, so its sampler drops the doc
        output_type=OutputType.MULTIPLE_CHOICE,
        version=0.0,
        tags=["siqa"],  # the name of lm-eval's task folder, which users also type
        example_rows=_EXAMPLES,
        **LM_EVAL_DEFAULTS,
    )
]
