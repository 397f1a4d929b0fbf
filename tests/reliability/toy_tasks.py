"""Small YAML tasks over local JSONL files, written per test, and helpers to compare run outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MC_TASK = """\
task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    train: {data}/train.jsonl
    test: {data}/test.jsonl
training_split: train
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_choice: choices
doc_to_target: "{{{{label}}}}"
metric_list:
  - metric: acc
  - metric: acc_norm
"""

GEN_TASK = """\
task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    train: {data}/train.jsonl
    test: {data}/test.jsonl
training_split: train
test_split: test
output_type: generate_until
doc_to_text: "Q: {{{{question}}}}\\nA:"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n"]
filter_list:
  - name: first_number
    filter:
      - function: regex
        regex_pattern: "(\\\\d+)"
      - function: take_first
metric_list:
  - metric: exact_match
"""


def write_rows(path: Path, n: int, prefix: str) -> None:
    """`n` rows with a question, four choices, a label and an answer, varied in length."""
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            row = {
                "question": f"{prefix} question {i} " + "why " * (i % 5),
                "choices": [f"option {i}", f"other {i * 7 % 11}", "neither", "both " * (i % 3)],
                "label": i % 4,
                "answer": str(i),
            }
            handle.write(json.dumps(row) + "\n")


def write_data(folder: Path, n_test: int = 24, n_train: int = 12, prefix: str = "") -> Path:
    """train.jsonl and test.jsonl in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    write_rows(folder / "train.jsonl", n_train, f"{prefix}train")
    write_rows(folder / "test.jsonl", n_test, f"{prefix}test")
    return folder


def write_task(folder: Path, name: str, kind: str = "mc", data: Path | None = None) -> Path:
    """A YAML task file `name.yaml` in `folder` (kind: "mc" or "gen")."""
    folder.mkdir(parents=True, exist_ok=True)
    template = MC_TASK if kind == "mc" else GEN_TASK
    path = folder / f"{name}.yaml"
    path.write_text(template.format(name=name, data=data or folder), encoding="utf-8")
    return path


VOLATILE_KEYS = {
    "date",
    "total_evaluation_time_seconds",
    "timings",
    "from_cache",
    "computed",
    "prefix_cache",
    "scoring",
}
"""results.json keys that legitimately differ between two runs of the same evaluation: when it
ran, how long it took, how many requests the response cache answered rather than the model,
what the model's prefix cache reused of what it computed, and how it scored what it computed
(`scoring`: a run the cache answers whole computes nothing, so it records no choice; a resumed
run reads what it had finished; the tests check those counts on their own)."""


def normalised_results(path: Path) -> dict[str, Any]:
    """results.json with timestamps and timings removed."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE_KEYS}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(json.loads(path.read_text(encoding="utf-8")))


def output_files(folder: Path) -> dict[str, bytes]:
    """samples_*.jsonl files of an output folder by name, as bytes."""
    return {p.name: p.read_bytes() for p in sorted(folder.glob("samples_*.jsonl"))}


def same_samples_but_float_noise(folder: Path, reference: Path, tolerance: float) -> bool:
    """The samples files of both folders hold the same records, log-likelihoods (written as
    strings in `resps` / `filtered_resps`) equal within `tolerance`, everything else exactly."""

    def close(a: Any, b: Any) -> bool:
        if isinstance(a, list) and isinstance(b, list):
            return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
        if isinstance(a, str) and isinstance(b, str) and a != b:
            try:
                return abs(float(a) - float(b)) <= tolerance
            except ValueError:
                return False
        return a == b

    mine, theirs = output_files(folder), output_files(reference)
    if mine.keys() != theirs.keys():
        return False
    for name, data in mine.items():
        rows = [json.loads(line) for line in data.decode().splitlines()]
        expected = [json.loads(line) for line in theirs[name].decode().splitlines()]
        if len(rows) != len(expected):
            return False
        for row, want in zip(rows, expected, strict=True):
            if row.keys() != want.keys():
                return False
            for key in row:
                noisy = key in ("resps", "filtered_resps")
                if not (close(row[key], want[key]) if noisy else row[key] == want[key]):
                    return False
    return True
