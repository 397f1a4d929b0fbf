"""Live estimates of `assay run`: the plain lines a non-terminal gets, the terminal display,
and their interval (the one results.json's stderr gives)."""

from __future__ import annotations

import io
import json
import re
import threading
from pathlib import Path

import pytest
from scipy import stats

from assay.cli.main import main
from assay.execution import progress as live
from assay.execution.progress import CacheCounts, LiveProgress, rate
from assay.metrics.stderr import mean_stderr
from assay.stats.normal import two_sided_z

TASKS_DIR = Path(__file__).parents[1] / "data" / "lm_eval_parity" / "tasks"
INTERVAL = re.compile(r"acc (\d\.\d{4}) \[(\d\.\d{4}), (\d\.\d{4})\]")


def scored(scores: list[float], total_docs: int, **kwargs) -> LiveProgress:
    """A disabled display (prints nothing) fed one shard of `scores`."""
    progress = LiveProgress("t", total_docs=total_docs, enabled=False, metric="acc", **kwargs)
    progress.start_shard(docs=len(scores), requests=len(scores))
    progress.shard_done(0, "tokens", scores)
    return progress


def expected_interval(scores: list[float]) -> tuple[str, str, str]:
    """mean ± z·stderr, with results.json's stderr, clipped to [0, 1]."""
    mean = sum(scores) / len(scores)
    half = two_sided_z(0.95) * mean_stderr(scores)
    return f"{mean:.4f}", f"{max(0.0, mean - half):.4f}", f"{min(1.0, mean + half):.4f}"


def clopper_pearson(scores: list[float]) -> tuple[str, str, str]:
    """scipy's exact interval on the count of 1s."""
    ci = stats.binomtest(int(sum(scores)), len(scores)).proportion_ci(0.95, method="exact")
    return f"{sum(scores) / len(scores):.4f}", f"{ci.low:.4f}", f"{ci.high:.4f}"


def test_a_limit_subset_is_not_the_population():
    # 4 docs of a 541-doc task (ifeval --limit 4): the interval is the sampling interval,
    # never the zero-width one a population of 4 would give; with one right answer it is the
    # exact one (the normal [0, 0.74] covers far less than 95 % on so few events).
    scores = [1.0, 0.0, 0.0, 0.0]
    line = scored(scores, total_docs=4).estimate()
    assert INTERVAL.search(line).groups() == clopper_pearson(scores)
    assert clopper_pearson(scores) == ("0.2500", "0.0063", "0.8059")
    assert line.endswith("exact (few events)")


def test_a_whole_run_ends_on_the_interval_of_its_stderr():
    # Every doc scored, 20 right and 20 wrong: the interval keeps the width results.json's
    # stderr gives it.
    scores = [1.0, 0.0] * 20
    progress = scored(scores, total_docs=len(scores))
    low, high = (float(x) for x in INTERVAL.search(progress.estimate()).groups()[1:])
    assert high - low > 0.25
    assert INTERVAL.search(progress.estimate()).groups() == expected_interval(scores)


def test_few_events_among_many_docs_get_the_exact_interval_and_others_a_mark():
    # 4 right of 200: the normal interval covered 0.89 there (benchmarks/coverage_atlas.py).
    scores = [1.0] * 4 + [0.0] * 196
    line = scored(scores, total_docs=1000).estimate()
    assert INTERVAL.search(line).groups() == clopper_pearson(scores)
    assert line.endswith("exact (few events)")
    # 10 right of 200: the normal interval again.
    scores = [1.0] * 10 + [0.0] * 190
    assert INTERVAL.search(scored(scores, 1000).estimate()).groups() == expected_interval(scores)
    # Values that are not 0/1, as close to 0: the normal interval, marked as unreliable.
    partial = [0.5] * 8 + [0.0] * 192
    line = scored(partial, total_docs=1000).estimate()
    assert INTERVAL.search(line).groups() == expected_interval(partial)
    assert "† (few docs away from 0: may cover less than 95 %)" in line


def test_one_doc_and_equal_values_give_no_interval():
    # 0/1 values without spread: the exact Clopper-Pearson bound (0 of 5 wrong: 1 - 0.05^(1/5)).
    assert (
        scored([1.0], total_docs=10).estimate() == "acc 1.0000 [0.0500, 1.0000] exact bound (1 doc)"
    )
    assert (
        scored([0.0] * 5, total_docs=5).estimate()
        == "acc 0.0000 [0.0000, 0.4507] exact bound (all 5 equal)"
    )


def test_values_outside_zero_one_are_not_clipped_to_it():
    scores = [30.0, 50.0, 40.0]
    estimate = LiveProgress("t", 3, enabled=False, metric="ppl")
    estimate.start_shard(3, 3)
    estimate.shard_done(0, None, scores)
    low, high = (
        float(x) for x in re.search(r"\[([\d.-]+), ([\d.]+)\]", estimate.estimate()).groups()
    )
    half = two_sided_z(0.95) * mean_stderr(scores)
    assert (low, high) == (round(40 - half, 4), round(40 + half, 4))


def test_slow_rates_read_as_seconds_per_doc():
    assert rate(3, 36.0, "doc") == "12 s/doc"
    assert rate(2, 5.0, "doc") == "2.5 s/doc"
    assert rate(30, 2.0, "doc") == "15.0 docs/s"


def test_cached_answers_are_counted_apart():
    progress = scored([1.0] * 8, total_docs=8, status=None)
    progress.shard_done(0, "tokens", [], CacheCounts(from_cache=8, requests=8))
    assert progress.rates() == "8/8 from cache"
    progress.shard_done(0, "tokens", [], CacheCounts(from_cache=5, requests=8))
    assert progress.rates().startswith("5/8 from cache, ")
    assert "tok/s" not in progress.rates()


class DrivenTimer:
    """A plain-line timer the test drives: `tick()` lets the display's thread print one line
    and returns once it has, so no line depends on how fast this machine runs."""

    BOUND = 60.0
    """Seconds a step may take before the test fails instead of hanging (never reached when
    the code works, however busy the machine)."""

    def __init__(self) -> None:
        self._due = threading.Semaphore(0)
        self._waiting = threading.Semaphore(0)

    def __call__(self, closed: threading.Event) -> bool:
        self._waiting.release()
        # Woken by a tick or by close(); the short wait only lets it see close() as well.
        while not closed.is_set():
            if self._due.acquire(timeout=0.01):
                return False
        return True

    def started(self) -> None:
        assert self._waiting.acquire(timeout=self.BOUND), "the timer thread never waited"

    def tick(self) -> None:
        self._due.release()
        assert self._waiting.acquire(timeout=self.BOUND), "the line was never printed"


def test_plain_lines_come_from_a_timer_before_any_shard_ends():
    stream, timer = io.StringIO(), DrivenTimer()
    progress = LiveProgress(
        "t", total_docs=10, enabled=True, stream=stream, metric="acc", status=lambda: "paced",
        timer=timer,
    )  # fmt: skip
    timer.started()
    assert stream.getvalue() == ""  # no line before the timer says so
    progress.start_shard(docs=10, requests=20)
    progress.advance(10)
    timer.tick()
    (line,) = stream.getvalue().splitlines()
    assert line.startswith("t: 5/10 docs, ") and "left" in line and line.endswith("paced")
    progress.close()
    assert stream.getvalue().splitlines() == [line]  # no shard ended: no closing line
    assert not any(t.name == "progress t" for t in threading.enumerate())


def test_the_default_timer_waits_the_plain_interval_or_the_end():
    closed = threading.Event()
    closed.set()
    assert live.every_plain_interval(closed) is True  # closed: returns at once, however slow


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_terminal_display_fits_80_columns_and_shows_the_estimate(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    stream = Terminal()
    progress = LiveProgress(
        "a_task_with_a_rather_long_name_indeed",
        total_docs=12345,
        enabled=True,
        stream=stream,
        metric="prompt_level_strict_acc",
        status=lambda: "waiting 12 s for the rate limit",
    )
    progress.start_shard(docs=512, requests=2048)
    progress.shard_done(123456, "tokens", [1.0, 0.0] * 256)
    progress.close()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", stream.getvalue())
    lines = [line for line in text.splitlines() if line.strip()]
    assert all(len(line) <= 80 for line in lines), lines
    assert any("512/12345 docs" in line for line in lines)
    assert any("prompt_level_strict_acc 0.5000 [" in line for line in lines)
    assert any("waiting 12 s" in line for line in lines)


def test_library_log_lines_go_above_the_bar_while_it_is_live(monkeypatch):
    import logging
    import sys

    monkeypatch.setenv("COLUMNS", "80")
    stream = Terminal()
    handler = logging.StreamHandler(sys.stderr)
    logger = logging.getLogger("transformers")
    logger.addHandler(handler)
    try:
        progress = LiveProgress("t", total_docs=4, enabled=True, stream=stream, metric="acc")
        assert handler.stream is not sys.stderr  # routed through the display's console
        logger.warning("`past_key_values` are deprecated")
        progress.close()
        assert handler.stream is sys.stderr  # restored when the task ends
    finally:
        logger.removeHandler(handler)
    assert "past_key_values" in stream.getvalue()


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


def test_a_run_ends_on_the_exact_interval_of_its_count(tmp_path, capsys):
    assert run(tmp_path) == 0
    err = capsys.readouterr().err
    line = re.search(r"parity_mc_same_split: 7/7 docs, .*", err)
    assert line, err
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    entry = results["results"]["parity_mc_same_split"]
    mean = entry["acc,none"]
    # 4 of 7 right: fewer than 10 on each side, so the exact interval on the count of 4.
    scores = [1.0] * round(mean * 7) + [0.0] * (7 - round(mean * 7))
    shown = clopper_pearson(scores)
    assert f"acc {shown[0]} [{shown[1]}, {shown[2]}] exact (few events)" in line.group(0)


def test_a_rerun_from_the_cache_says_so(tmp_path, capsys):
    assert run(tmp_path) == 0
    capsys.readouterr()
    assert run(tmp_path) == 0
    err = capsys.readouterr().err
    assert re.search(r"parity_mc_same_split: 7/7 docs, (\d+)/\1 from cache", err), err


def test_an_interrupted_task_leaves_no_part_files(tmp_path, monkeypatch):
    from assay.models.dummy import DummyLM

    def interrupted(self, requests):
        raise KeyboardInterrupt

    monkeypatch.setattr(DummyLM, "loglikelihood", interrupted)
    assert run(tmp_path, "--log-samples") == 130
    assert not list((tmp_path / "out").glob(".samples_*"))


def test_no_progress_silences_the_live_line(tmp_path, capsys):
    assert run(tmp_path, "--no-progress") == 0
    assert "docs" not in capsys.readouterr().err


@pytest.mark.parametrize("status", [None, "paced"])
def test_the_backend_status_shows_only_when_it_has_one(status):
    progress = LiveProgress("t", 4, enabled=False, status=lambda: status)
    assert progress.plain_line().endswith("paced") == (status is not None)
