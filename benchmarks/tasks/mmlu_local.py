"""The built-in MMLU subject tasks over local rows, for prefix-reuse figures without the Hub.

    assay run --custom-tasks benchmarks/tasks/mmlu_local.py --tasks mmlu_local_anatomy,... -f 5

Each task is the built-in `mmlu_<subject>` (its description, lettered prompt and letter
choices), with its dataset replaced by MMLU-shaped rows made from the local HellaSwag dump
(question = activity and context, choices = the four endings, answer = the label): 5 dev rows
for the few-shot examples and ROWS test rows per subject, different rows for each subject.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from assay.catalog.mmlu import TASKS_TABLE as MMLU

# Relative to the directory the command runs in, as the task YAMLs' data_files.
HELLASWAG = Path("../shared/data/hellaswag/hellaswag_val.jsonl")
SUBJECTS = ("anatomy", "astronomy", "marketing", "sociology")
ROWS = 50


def _rows(offset: int, n: int) -> list[dict]:
    with HELLASWAG.open() as lines:
        raw = [json.loads(line) for _, line in zip(range(offset + n), lines, strict=False)]
    return [
        {
            "question": f"{row['activity_label']}: {row['ctx']}",
            "subject": "hellaswag",
            "choices": row["endings"],
            "answer": int(row["label"]),
        }
        for row in raw[offset:]
    ]


def _loader(index: int):
    start = index * (ROWS + 5)

    def load(**_kwargs) -> dict[str, list[dict]]:
        return {"dev": _rows(start, 5), "test": _rows(start + 5, ROWS)}

    return load


_BUILT_IN = {config.name: config for config in MMLU}

TASKS_TABLE = [
    dataclasses.replace(
        _BUILT_IN[f"mmlu_{subject}"],
        name=f"mmlu_local_{subject}",
        hf_repo=None,
        hf_subset=None,
        dataset_loader=_loader(i),
        example_rows=None,
    )
    for i, subject in enumerate(SUBJECTS)
]
