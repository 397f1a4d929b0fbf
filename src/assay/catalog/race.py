"""RACE (Lai et al. 2017): reading comprehension from English exams for Chinese students.

`race` follows lm-eval 0.4.13: each row is an article with several questions; the prompt is the
article, the earlier questions answered (fill-in-the-blank ones completed inline), and the last
question, scored against its four options (acc). Test split of the high-school set; few-shot
examples come from the test split too. Dataset `EleutherAI/race` (subset high); lm-eval pins no
revision.
"""

from __future__ import annotations

import ast
from typing import Any

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, choice_doc
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig

_LETTER_INDEX = {"A": 0, "B": 1, "C": 2, "D": 3}
_BLANK_END = "  _  ."


def _problems(row: Row) -> list[dict[str, Any]]:
    """The `problems` column is a Python literal (a list of dicts) stored as a string."""
    return ast.literal_eval(row["problems"])


def _answer_text(problem: dict[str, Any]) -> str:
    return problem["options"][_LETTER_INDEX[problem["answer"]]]


def race_query(row: Row) -> str:
    """Article, then each earlier question with its answer, then the last question."""
    *earlier, last = _problems(row)
    text = "Article: " + row["article"] + "\n\n"
    for problem in earlier:
        question = problem["question"]
        if question[-len(_BLANK_END) :] == _BLANK_END:
            # lm-eval keeps one of the two spaces before the blank and fills it in.
            text += question[:-5] + _answer_text(problem) + "\n"
        else:
            text += "Question: " + question + "\n" + "Answer: " + _answer_text(problem) + "\n"
    return text + last["question"]


def race_prompt(row: Row, task_name: str) -> Doc:
    """The article prompt; the last question's four options are the continuations."""
    last = _problems(row)[-1]
    return choice_doc(race_query(row), last["options"][:4], _LETTER_INDEX[last["answer"]])


_EXAMPLES = [
    {
        "example_id": "high19432.txt",
        "article": "The rain had continued for a week and the flood had created a big river.",
        "problems": repr(
            [
                {
                    "answer": "B",
                    "options": ["a week", "seven days", "a month", "a year"],
                    "question": "How long had the rain lasted?",
                },
                {
                    "answer": "C",
                    "options": ["a lake", "a sea", "a big river", "a pond"],
                    "question": "What had the flood created?",
                },
            ]
        ),
    }
]

TASKS_TABLE = [
    TaskConfig(
        name="race",
        prompt_function=race_prompt,
        hf_repo="EleutherAI/race",
        hf_subset="high",
        metrics=["acc"],
        hf_avail_splits=("test",),
        evaluation_splits=("test",),
        few_shots_split="test",
        fewshot_drop_equal=False,  # lm-eval samples this pool without dropping the doc
        output_type=OutputType.MULTIPLE_CHOICE,
        version=3.0,
        example_rows=_EXAMPLES,
        **LM_EVAL_DEFAULTS,
    )
]
