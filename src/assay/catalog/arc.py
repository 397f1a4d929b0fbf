"""ARC (Clark et al. 2018): grade-school science questions, Easy and Challenge sets.

`arc_easy` and `arc_challenge` follow lm-eval 0.4.13: "Question: ...\\nAnswer:" scored against
each answer text, acc and acc_norm, test split, few-shot examples drawn from train.
Dataset `allenai/ai2_arc` (subsets ARC-Easy, ARC-Challenge); lm-eval pins no revision.
"""

from __future__ import annotations

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, choice_doc
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig


def arc_prompt(row: Row, task_name: str) -> Doc:
    """Question, then each answer text as a continuation; gold is the answerKey's position."""
    gold = row["choices"]["label"].index(row["answerKey"])
    return choice_doc(f"Question: {row['question']}\nAnswer:", row["choices"]["text"], gold)


_EXAMPLES = [
    {
        "id": "Mercury_7175875",
        "question": "Which gas do plants take in from the air to make food?",
        "choices": {"text": ["oxygen", "carbon dioxide", "nitrogen"], "label": ["A", "B", "C"]},
        "answerKey": "B",
    },
    {
        "id": "Mercury_7029645",
        "question": "What is the boiling point of water at sea level?",
        "choices": {"text": ["50 C", "100 C", "150 C", "200 C"], "label": ["1", "2", "3", "4"]},
        "answerKey": "2",
    },
]


def _arc(name: str, subset: str) -> TaskConfig:
    return TaskConfig(
        name=name,
        prompt_function=arc_prompt,
        hf_repo="allenai/ai2_arc",
        hf_subset=subset,
        metrics=["acc", "acc_norm"],
        evaluation_splits=("test",),
        few_shots_split="train",
        output_type=OutputType.MULTIPLE_CHOICE,
        tags=["ai2_arc"],
        version=1.0,
        example_rows=_EXAMPLES,
        **LM_EVAL_DEFAULTS,
    )


TASKS_TABLE = [_arc("arc_easy", "ARC-Easy"), _arc("arc_challenge", "ARC-Challenge")]
