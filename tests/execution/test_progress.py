"""Live estimates of `assay run`: the plain lines a non-terminal gets, and their interval."""

from __future__ import annotations

import io
import math
import re
from pathlib import Path

from scipy import stats

from assay.cli.main import main
from assay.execution import progress as live
from assay.execution.progress import LiveProgress

TASKS_DIR = Path(__file__).parents[1] / "data" / "lm_eval_parity" / "tasks"


def test_plain_lines_carry_counts_rates_and_the_running_interval(monkeypatch):
    monkeypatch.setattr(live, "PLAIN_EVERY_SECONDS", 0.0)
    stream = io.StringIO()
    progress = LiveProgress("t", total_docs=10, enabled=True, stream=stream, metric="acc")
    progress.start_shard(docs=4, requests=16)
    progress.advance(16)
    progress.shard_done(400, "tokens", [1.0, 0.0, 1.0, 1.0])
    progress.close()
    first = stream.getvalue().splitlines()[0]
    assert first.startswith("t: 4/10 docs, ")
    assert "tok/s" in first and "s left" in first
    # Normal interval with the observed variance and the finite-population correction.
    scores = [1.0, 0.0, 1.0, 1.0]
    mean, n, population = sum(scores) / 4, 4, 10
    variance = sum((s - mean) ** 2 for s in scores) / (n - 1)
    half = (
        stats.norm.ppf(0.975)
        * math.sqrt(variance / n)
        * math.sqrt((population - n) / (population - 1))
    )
    low, high = (float(x) for x in re.search(r"acc 0\.7500 \[([\d.]+), ([\d.]+)\]", first).groups())
    assert low == round(mean - half, 4)
    assert high == round(min(1.0, mean + half), 4)


def test_disabled_progress_writes_nothing():
    stream = io.StringIO()
    progress = LiveProgress("t", total_docs=3, enabled=False, stream=stream, metric="acc")
    progress.start_shard(3, 3)
    progress.advance(3)
    progress.shard_done(10, None, [1.0, 1.0, 0.0])
    progress.close()
    assert stream.getvalue() == ""


def run(tmp_path: Path, *flags: str) -> int:
    return main(
        [
            "run",
            "--model",
            "dummy",
            "--include-path",
            str(TASKS_DIR),
            "--tasks",
            "parity_mc_same_split",
            "--output-dir",
            str(tmp_path / "out"),
            *flags,
        ]
    )


def test_a_run_off_a_terminal_ends_each_task_with_a_plain_line(tmp_path, capsys):
    assert run(tmp_path) == 0
    err = capsys.readouterr().err
    assert re.search(r"parity_mc_same_split: 7/7 docs, .* acc [\d.]+ \[", err), err


def test_no_progress_silences_the_live_line(tmp_path, capsys):
    assert run(tmp_path, "--no-progress") == 0
    assert "docs/s" not in capsys.readouterr().err
