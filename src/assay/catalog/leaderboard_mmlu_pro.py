"""MMLU-Pro as the Open LLM Leaderboard v2 scores it: ten-option questions, letter likelihoods.

`leaderboard_mmlu_pro` follows lm-eval 0.4.13: the question, then each option as it is stored
(not stripped) on its own line lettered "A." onwards, then "Answer:"; the continuations are
" A", " B", ... up to the row's number of options, and acc is the share of questions whose
answer letter is the most likely one. One task over all 14 categories (no per-category tasks,
no description). Unlike the generative `mmlu_pro` tasks, the 5 few-shot examples are the first
5 rows of the validation split whatever their category, the same examples for every question,
each answered with its bare letter.
Dataset `TIGER-Lab/MMLU-Pro`, test split; lm-eval pins no revision.

Deviation: a row whose answer letter is not one of its options fails the run with a data
error; lm-eval logs a warning and scores the row 0. No row of the dataset is like that.
This task is not yet part of the `leaderboard` suite.
"""

from __future__ import annotations

from string import ascii_uppercase

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, choice_doc
from assay.catalog.mmlu_pro import EXAMPLES, option_lines
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig


def option_letters(row: Row) -> list[str]:
    """One letter per option: "A", "B", ..."""
    return list(ascii_uppercase[: len(row["options"])])


def leaderboard_mmlu_pro_query(row: Row) -> str:
    """The question, its options as stored, lettered, and "Answer:"."""
    return f"{row['question']}\n{option_lines(row['options'], ascii_uppercase)}Answer:"


def leaderboard_mmlu_pro_prompt(row: Row, task_name: str) -> Doc:
    """The letters are the continuations; gold is the `answer` letter's position."""
    letters = option_letters(row)
    return choice_doc(
        leaderboard_mmlu_pro_query(row),
        letters,
        letters.index(row["answer"]),
        target=row["answer"],
    )


TASKS_TABLE = [
    TaskConfig(
        name="leaderboard_mmlu_pro",
        prompt_function=leaderboard_mmlu_pro_prompt,
        hf_repo="TIGER-Lab/MMLU-Pro",
        metrics=["acc"],
        hf_avail_splits=("validation", "test"),
        evaluation_splits=("test",),
        few_shots_split="validation",
        few_shots_select="first_n",
        num_fewshots=5,
        output_type=OutputType.MULTIPLE_CHOICE,
        version=0.1,
        example_rows=[{**row, "category": "math"} for row in EXAMPLES],
        **LM_EVAL_DEFAULTS,
    )
]
