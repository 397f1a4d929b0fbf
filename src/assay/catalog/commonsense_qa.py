"""CommonsenseQA (Talmor et al. 2019): five-way questions needing everyday knowledge.

`commonsense_qa` follows lm-eval 0.4.13: the question with options lettered A-E, then
"Answer:", scored against the letters " A".." E" (acc); validation split, few-shot examples
drawn from train. Dataset `tau/commonsense_qa`; lm-eval pins no revision.
"""

from __future__ import annotations

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, choice_doc
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig

LETTERS = ["A", "B", "C", "D", "E"]


def commonsense_qa_prompt(row: Row, task_name: str) -> Doc:
    """Question and five lettered options; the letters are the continuations."""
    texts = row["choices"]["text"]
    options = "".join(f"\n{letter}. {texts[i]}" for i, letter in enumerate(LETTERS))
    query = f"Question: {row['question'].strip()}{options}\nAnswer:"
    return choice_doc(query, LETTERS, LETTERS.index(row["answerKey"]), target=row["answerKey"])


_EXAMPLES = [
    {
        "id": "075e483d21c29a511267ef62bedc0461",
        "question": "The sanctions against the school were a punishing blow, and they seemed to "
        "what the efforts the school had made to change?",
        "question_concept": "punishing",
        "choices": {
            "label": LETTERS,
            "text": ["ignore", "enforce", "authoritarian", "yell at", "avoid"],
        },
        "answerKey": "A",
    }
]

TASKS_TABLE = [
    TaskConfig(
        name="commonsense_qa",
        prompt_function=commonsense_qa_prompt,
        hf_repo="tau/commonsense_qa",
        metrics=["acc"],
        hf_avail_splits=("train", "validation"),
        evaluation_splits=("validation",),
        few_shots_split="train",
        fewshot_drop_equal=True,  # lm-eval: no test split, so its sampler drops the doc
        output_type=OutputType.MULTIPLE_CHOICE,
        example_rows=_EXAMPLES,
        **LM_EVAL_DEFAULTS,
    )
]
