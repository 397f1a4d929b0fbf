"""GPQA (Rein et al. 2023): graduate-level, "Google-proof" science questions, four options.

`gpqa_main_zeroshot`, `gpqa_diamond_zeroshot` and `gpqa_extended_zeroshot` follow lm-eval
0.4.13's zero-shot variant: "What is the correct answer to this question:<question>\\nChoices:"
with the four answers as "(A)".."(D)", scored against the letters (acc, acc_norm). Always
zero-shot; the dataset has only a train split, which is evaluated.

The answers are shuffled. lm-eval shuffles with Python's global `random`, seeded 0 at the start
of a run, and `datasets` caches that first shuffle for later calls; assay shuffles each split
with its own generator seeded 0, which gives the order of a fresh single-task lm-eval run. (When
lm-eval runs several GPQA variants in one process, or reuses a cache written by an earlier run
with other tasks, its order can differ.)
Dataset `Idavidrein/gpqa` (subsets gpqa_main, gpqa_diamond, gpqa_extended; gated on the hub:
accept its terms and log in before the first download); lm-eval pins no revision.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from functools import partial

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, choice_doc
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig

LABELS = ["(A)", "(B)", "(C)", "(D)"]
SHUFFLE_SEED = 0
"""lm-eval's default Python random seed, which its zero-shot GPQA shuffle draws from."""
BRACKETED = re.compile(r"\[.*?\]")


def clean(text: str | None, *, drop_brackets: bool = False) -> str:
    """Strip, turn " [title]" into a sentence break, drop every other "[...]" if asked (the
    leaderboard's variant) and squeeze one double space; a missing answer becomes a single
    space (as in lm-eval)."""
    if text is None:
        return " "
    text = text.strip().replace(" [title]", ". ")
    if drop_brackets:
        text = BRACKETED.sub("", text)
    return text.replace("  ", " ")


def shuffle_answers(rows: Iterable[Row], *, drop_brackets: bool = False) -> list[Row]:
    """Add choice1..choice4 (the cleaned answers, shuffled) and `answer` ("(A)".."(D)", where
    the correct one landed) to each row."""
    rng = random.Random(SHUFFLE_SEED)
    tidy = partial(clean, drop_brackets=drop_brackets)
    out = []
    for row in rows:
        correct = tidy(row["Correct Answer"])
        choices = [tidy(row[f"Incorrect Answer {i}"]) for i in (1, 2, 3)] + [correct]
        rng.shuffle(choices)
        fields = {f"choice{i + 1}": choice for i, choice in enumerate(choices)}
        out.append({**row, **fields, "answer": f"({'ABCD'[choices.index(correct)]})"})
    return out


def gpqa_doc(row: Row, answer_cue: str = "Answer:") -> Doc:
    """The question and lettered answers, then `answer_cue`; the letters are the continuations."""
    options = "".join(f"\n{label} {row[f'choice{i + 1}']}" for i, label in enumerate(LABELS))
    query = f"What is the correct answer to this question:{row['Question']}\nChoices:{options}\n"
    return choice_doc(query + answer_cue, LABELS, LABELS.index(row["answer"]), target=row["answer"])


def gpqa_prompt(row: Row, task_name: str) -> Doc:
    """The question and lettered answers, ending in "Answer:"."""
    return gpqa_doc(row)


EXAMPLES = [
    {
        "Question": "A large gene has dozens of exons, of which the central ones code for "
        "folded triple helical repeats. Which structure is involved in the proposed therapy?",
        "Correct Answer": "R-loops",
        "Incorrect Answer 1": "lariat",
        "Incorrect Answer 2": "polyA tail",
        "Incorrect Answer 3": "antisense",
        "Record ID": "recTS2SpRXxmLu0eI",
        "High-level domain": "Biology",
        "Subdomain": "Molecular Biology",
    }
]


def _gpqa(subset: str) -> TaskConfig:
    return TaskConfig(
        name=f"{subset}_zeroshot",
        prompt_function=gpqa_prompt,
        hf_repo="Idavidrein/gpqa",
        hf_subset=subset,
        metrics=["acc", "acc_norm"],
        hf_avail_splits=("train",),
        evaluation_splits=("train",),
        few_shots_split="train",
        num_fewshots=0,
        num_fewshots_fixed=True,
        process_docs=shuffle_answers,
        output_type=OutputType.MULTIPLE_CHOICE,
        version=2.2,
        example_rows=EXAMPLES,
        **LM_EVAL_DEFAULTS,
    )


TASKS_TABLE = [_gpqa("gpqa_main"), _gpqa("gpqa_diamond"), _gpqa("gpqa_extended")]
