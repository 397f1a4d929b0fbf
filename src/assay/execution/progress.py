"""Live estimates while `assay run` works through a task (the executor advances the bar).

Per task: docs scored of the total, docs/s and tokens/s, time left, and the running value of
the task's first metric with its confidence interval, refreshed after every shard of docs. On a
terminal this is a rich progress line; elsewhere (a CI log, a file) a plain line every
`PLAIN_EVERY_SECONDS` and one when the task ends, so logs stay short.

The interval is stats.online's normal interval with the observed variance and the
finite-population correction (the docs of a task are a finite population): a fixed-sample
interval read at each shard, meant for watching a run, not for stopping it early (that is what
run_evals' `anytime` strategy is for).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterable
from typing import Any, TextIO

from assay.stats.online import OnlineSettings, RunningEstimate, mean_interval

PLAIN_EVERY_SECONDS = 30.0
"""How often a non-terminal gets a progress line."""


def silence_library_progress() -> None:
    """Turn off the progress bars of transformers, datasets and huggingface_hub (for
    `--no-progress`), without importing any of them that is not loaded yet."""
    import os

    os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["TRANSFORMERS_NO_TQDM"] = "1"
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    if "datasets" in sys.modules:
        import datasets

        datasets.disable_progress_bars()


class LiveProgress:
    """The live line of one task. `enabled=False` shows nothing."""

    def __init__(
        self,
        task: str,
        total_docs: int,
        enabled: bool,
        stream: TextIO | None = None,
        metric: str | None = None,
    ) -> None:
        self.task = task
        self.total_docs = total_docs
        self.metric = metric
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.docs = 0
        self.tokens = 0
        self.token_unit = "tokens"
        self.scores = RunningEstimate()
        self.low, self.high = 0.0, 1.0
        self.started = time.perf_counter()
        self.last_line = self.started
        self._shard_docs = self._shard_requests = self._shard_done = 0
        self._bar: Any = None
        if enabled and self.stream.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("docs"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[rates]}"),
                TextColumn("{task.fields[estimate]}"),
                console=Console(file=self.stream),
                transient=False,
            )
            self._bar.start()
            self._id = self._bar.add_task(task, total=total_docs, rates="", estimate="")

    def start_shard(self, docs: int, requests: int) -> None:
        """A shard of `docs` docs asking `requests` requests goes to the model."""
        self._shard_docs, self._shard_requests, self._shard_done = docs, max(requests, 1), 0

    def advance(self, requests: int) -> None:
        """`requests` more requests of the current shard answered (the executor's callback):
        the bar moves by the share of the shard's docs they stand for."""
        self._shard_done += requests
        if self._bar is not None:
            share = min(self._shard_done / self._shard_requests, 1.0)
            self._bar.update(self._id, completed=self.docs + share * self._shard_docs)

    def shard_done(self, tokens: int, token_unit: str | None, scores: Iterable[Any]) -> None:
        """The current shard is scored: the task's token count so far, and the shard's values
        of the task's first metric."""
        self.docs += self._shard_docs
        self.tokens = tokens
        self.token_unit = token_unit or self.token_unit
        for value in scores:
            if isinstance(value, bool | int | float) and math.isfinite(value):
                self.low, self.high = min(self.low, float(value)), max(self.high, float(value))
                self.scores.add(float(value))
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(
                self._id, completed=self.docs, rates=self.rates(), estimate=self.estimate()
            )
        elif time.perf_counter() - self.last_line >= PLAIN_EVERY_SECONDS:
            self._plain()

    def rates(self) -> str:
        """docs/s and tokens/s so far."""
        seconds = max(time.perf_counter() - self.started, 1e-9)
        unit = "tok" if self.token_unit == "tokens" else "chars"
        return f"{self.docs / seconds:.1f} docs/s, {self.tokens / seconds:.0f} {unit}/s"

    def estimate(self) -> str:
        """The running metric with its interval ("" before any score)."""
        if self.metric is None or self.scores.n == 0:
            return ""
        interval = mean_interval(
            self.scores.mean,
            self.scores.n,
            value_range=(self.low, self.high),
            variance=self.scores.variance,
            population=max(self.total_docs, self.scores.n),
            settings=OnlineSettings(),
        )
        return f"{self.metric} {interval.value:.4f} [{interval.lower:.4f}, {interval.upper:.4f}]"

    def _plain(self) -> None:
        self.last_line = time.perf_counter()
        left = ""
        if 0 < self.docs < self.total_docs:
            seconds = (self.last_line - self.started) / self.docs * (self.total_docs - self.docs)
            left = f", {seconds:.0f} s left"
        estimate = self.estimate()
        self.stream.write(
            f"{self.task}: {self.docs}/{self.total_docs} docs, {self.rates()}{left}"
            + (f", {estimate}" if estimate else "")
            + "\n"
        )
        self.stream.flush()

    def close(self) -> None:
        """The task ended: stop the bar, or print the last plain line."""
        if self._bar is not None:
            self._bar.stop()
        elif self.enabled and self.docs:
            self._plain()
