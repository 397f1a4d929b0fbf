"""HumanEval through the sandbox: the same scores with and without namespaces, each program's
outcome in the samples file."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from math import comb
from pathlib import Path

import pytest

from assay.models.dummy import DummyLM
from assay.requests.types import GenerateRequest
from assay.results.compare import what_differs
from assay.results.readers import read_run
from assay.run.api import evaluate

# The bundled example row of HumanEval is `add(a, b)`; four completions of it, cycled over the
# 64 samples of humaneval_64 (16 each): one right, three wrong in different ways.
RIGHT = "    return a + b\n"
COMPLETIONS = [
    RIGHT,
    "    return a - b\n",  # an assertion fails
    "    raise ValueError('no')\n",  # an exception
    "    blob = bytearray(8 * 1024 ** 3)\n    return a + b\n",  # the memory limit
]

TASKS = """\
from dataclasses import replace

from assay.catalog.humaneval import TASKS_TABLE as HUMANEVAL


def example_rows(config):
    rows = list(config.example_rows)
    return lambda **_: {"test": rows}


TASKS_TABLE = [
    replace(c, name="example_" + c.name, hf_repo=None, dataset_loader=example_rows(c))
    for c in HUMANEVAL
]
"""


class Cycling(DummyLM):
    """Answers the n-th generation request with COMPLETIONS[n % 4]."""

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str]:
        return [COMPLETIONS[i % len(COMPLETIONS)] for i in range(len(requests))]


def run(tmp_path: Path, sandbox: str) -> tuple[dict, list[dict]]:
    tasks = tmp_path / "example_tasks.py"
    tasks.write_text(TASKS)
    out = tmp_path / sandbox
    results = evaluate(
        Cycling(),
        "example_humaneval,example_humaneval_64",
        custom_tasks=tasks,
        confirm_run_unsafe_code=True,
        sandbox=sandbox,  # type: ignore[arg-type]
        output_dir=out,
        log_samples=True,
        cache=False,
        show_progress=False,
    )
    lines = (out / "samples_example_humaneval_64.jsonl").read_text().splitlines()
    for task in ("example_humaneval", "example_humaneval_64"):
        assert results["provenance"]["tasks"][task]["sandbox"] == sandbox
    return results["results"], [json.loads(line) for line in lines]


@pytest.mark.slow
def test_humaneval_scores_the_same_with_and_without_the_namespace_sandbox(tmp_path):
    scores, samples = {}, {}
    for mode in ("bwrap", "rlimits"):
        scores[mode], samples[mode] = run(tmp_path, mode)
    assert scores["bwrap"] == scores["rlimits"]
    # Expected values from the unbiased estimator with n=64 samples, c=16 correct.
    entry = scores["bwrap"]["example_humaneval_64"]
    for k in (2, 8, 16, 32, 64):
        expected = 1 - comb(64 - 16, k) / comb(64, k)
        assert entry[f"pass@{k},create_test"] == pytest.approx(expected)
    assert scores["bwrap"]["example_humaneval"]["pass@1,create_test"] == 1.0
    for mode in ("bwrap", "rlimits"):
        [record] = samples[mode]
        runs = record["executions"]
        assert len(runs) == 64 and {r["mode"] for r in runs} == {mode}
        assert [r["outcome"] for r in runs[:4]] == [
            "passed", "failed", "failed", "killed_by_limit"
        ]  # fmt: skip
        assert Counter(r["outcome"] for r in runs) == {
            "passed": 16, "failed": 32, "killed_by_limit": 16
        }  # fmt: skip
        assert "AssertionError" in runs[1]["stderr_tail"]
        assert "ValueError: no" in runs[2]["stderr_tail"]
        assert runs[3]["detail"] == "memory"
    # The two runs' numbers agree, but compare still says where their code ran.
    differs = what_differs(read_run(tmp_path / "bwrap"), read_run(tmp_path / "rlimits"))
    assert ("task.example_humaneval_64.sandbox", "bwrap", "rlimits") in differs


FOUR_DOCS = """\
from dataclasses import replace

from assay.catalog.humaneval import TASKS_TABLE as HUMANEVAL

ROWS = [dict(HUMANEVAL[0].example_rows[0], task_id=f"HumanEval/{i}") for i in range(4)]
TASKS_TABLE = [replace(HUMANEVAL[0], name="four_docs", hf_repo=None,
                       dataset_loader=lambda **_: {"test": ROWS})]
"""


class Logging(DummyLM):
    """Every completion notes when its program starts and ends in `log` (a host file: the
    rlimits mode lets programs write it). A program ends only once `together` programs have
    started (or after 2.5 s, within code_eval's 3 s), then 0.2 s later: programs the pool runs
    at once are seen together however slowly each starts (the machine's load decides nothing),
    and a pool that ran more at once than it may would show them overlapping."""

    def __init__(self, log: Path, together: int) -> None:
        super().__init__()
        self.log, self.together = log, together

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str]:
        body = (
            "    import time\n"
            f"    log_path = {str(self.log)!r}\n"
            "    with open(log_path, 'a') as log:\n"
            "        log.write(f'{time.time()} 1\\n')\n"
            "    end = time.monotonic() + 2.5\n"
            f"    while open(log_path).read().count(' 1\\n') < {self.together} "
            "and time.monotonic() < end:\n"
            "        time.sleep(0.01)\n"
            "    time.sleep(0.2)\n"
            "    with open(log_path, 'a') as log:\n"
            "        log.write(f'{time.time()} -1\\n')\n"
            "    return a + b\n"
        )
        return [body for _ in requests]


def most_at_once(log: Path) -> int:
    events = sorted(
        (float(t), int(d)) for t, d in (line.split() for line in log.read_text().splitlines())
    )
    running = peak = 0
    for _, change in events:
        running += change
        peak = max(peak, running)
    return peak


@pytest.mark.parametrize("workers", [1, 2])
def test_docs_with_one_program_each_share_the_bounded_pool(tmp_path, workers):
    tasks = tmp_path / "four_docs.py"
    tasks.write_text(FOUR_DOCS)
    log = tmp_path / "log.txt"
    results = evaluate(Logging(log, together=workers), "four_docs", custom_tasks=tasks, confirm_run_unsafe_code=True,
                       sandbox="rlimits", sandbox_workers=workers, cache=False, show_progress=False)  # fmt: skip
    assert results["results"]["four_docs"]["pass@1,create_test"] == 1.0
    assert len(log.read_text().splitlines()) == 8
    assert most_at_once(log) == workers
