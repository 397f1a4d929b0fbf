"""Live estimates while `assay run` works through a task (the executor advances the bar).

Per task: docs answered of the total, how fast (answers served by the response cache counted
apart: "8/8 from cache"), time left, the running value of the task's first metric with its
interval (refreshed after every shard of docs is scored), and the backend's own status line
(`LM.live_status`, e.g. an API's pacing). On a terminal this is a two-line display that fits
80 columns; elsewhere (a CI log, `nohup`) a plain line every `PLAIN_EVERY_SECONDS`, from a
timer, and one when the task ends.

The interval is the one results.json's `<metric>_stderr` describes: the running mean ± z·SE,
SE = sample stddev / sqrt(n), no finite-population correction. The docs of a benchmark are a
sample of the questions it stands for, so neither a `--limit` subset nor a whole run is the
population: at the end of a run the interval is the table's value ± 1.96 × its stderr. It is
a fixed-sample interval read at each shard, meant for watching a run, not for stopping it early
(that is what run_evals' `anytime` strategy is for). With one doc, or docs that all scored the
same, the spread is unknown and no interval is shown. A 0/1 metric with fewer than 10 docs on
its rarer side (`stats.online.FEW_EVENTS`) gets the exact Clopper-Pearson interval instead
("exact (few events)": the normal one covered 89 % at 4 events), and other values that close
to an end of [0, 1] are marked † as unreliable.
"""

from __future__ import annotations

import logging
import math
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from assay.stats.online import OnlineSettings, RunningEstimate, mean_interval

PLAIN_EVERY_SECONDS = 30.0
"""How often a non-terminal gets a progress line."""

Timer = Callable[[threading.Event], bool]
"""What the plain-line thread waits on before each line: given the display's `closed` event,
it returns once the next line is due (False) or the display closed (True)."""


def every_plain_interval(closed: threading.Event) -> bool:
    """The plain lines' timer: PLAIN_EVERY_SECONDS of wall-clock time, or the display's end."""
    return closed.wait(PLAIN_EVERY_SECONDS)


LIBRARY_LOGGERS = ("transformers", "datasets", "huggingface_hub", "vllm", "accelerate")
"""Loggers with handlers of their own whose lines would break a live terminal display."""


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


@dataclass(frozen=True, slots=True)
class CacheCounts:
    """Distinct requests of a task so far: answered by the response cache, and all of them."""

    from_cache: int = 0
    requests: int = 0

    @property
    def computed(self) -> int:
        return self.requests - self.from_cache


def rate(count: float, seconds: float, unit: str, units: str | None = None) -> str:
    """`count` per `seconds`, as "12.3 docs/s" (`units`, default `unit` + "s"), or "12 s/doc"
    when under one a second (a slow run would otherwise read "0.0 docs/s")."""
    units = units or unit + "s"
    if count <= 0:
        return f"0 {units}/s"
    per_second = count / max(seconds, 1e-9)
    if per_second >= 100:
        return f"{per_second:.0f} {units}/s"
    if per_second >= 1.0:
        return f"{per_second:.1f} {units}/s"
    per_item = seconds / count
    return f"{per_item:.1f} s/{unit}" if per_item < 10 else f"{per_item:.0f} s/{unit}"


def clock(seconds: float) -> str:
    """0:42, 12:05, 1:02:03."""
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class LiveProgress:
    """The live display of one task. `enabled=False` shows nothing.

    `status` is the backend's `live_status` (a short fragment, or None when it has nothing to
    say); it is read at every refresh. `timer` paces a non-terminal's plain lines (default
    `every_plain_interval`; a test passes one it drives).
    """

    def __init__(
        self,
        task: str,
        total_docs: int,
        enabled: bool,
        stream: TextIO | None = None,
        metric: str | None = None,
        status: Callable[[], str | None] | None = None,
        timer: Timer = every_plain_interval,
    ) -> None:
        self.task = task
        self.total_docs = total_docs
        self.metric = metric
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.status = status
        self.docs = 0
        self.tokens = 0
        self.token_unit = "tokens"
        self.cache = CacheCounts()
        self.scores = RunningEstimate()
        self.bounded = True
        """Every value so far lies in [0, 1], so the interval is clipped to it."""
        self.started = time.perf_counter()
        self._shard_docs = self._shard_requests = self._shard_done = 0
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._live: Any = None
        self._timer: threading.Thread | None = None
        self._wait_for_line = timer
        self._restore: Callable[[], None] | None = None
        if not enabled:
            return
        if self.stream.isatty():
            self._start_live()
        else:
            self._timer = threading.Thread(
                target=self._plain_every, name=f"progress {task}", daemon=True
            )
            self._timer.start()

    # ------------------------------------------------------------ fed by the evaluator
    def start_shard(self, docs: int, requests: int) -> None:
        """A shard of `docs` docs asking `requests` requests goes to the model."""
        with self._lock:
            self._shard_docs, self._shard_requests, self._shard_done = docs, max(requests, 1), 0

    def advance(self, requests: int) -> None:
        """`requests` more requests of the current shard answered (the executor's callback)."""
        with self._lock:
            self._shard_done += requests
        self._refresh()

    def shard_done(
        self,
        tokens: int,
        token_unit: str | None,
        scores: Iterable[Any],
        cache: CacheCounts | None = None,
    ) -> None:
        """The current shard is scored: the task's token count and cache counts so far, and the
        shard's values of the task's first metric."""
        with self._lock:
            self.docs += self._shard_docs
            self._shard_docs = self._shard_done = 0
            self.tokens = tokens
            self.token_unit = token_unit or self.token_unit
            self.cache = cache or self.cache
            for value in scores:
                if isinstance(value, bool | int | float) and math.isfinite(value):
                    self.bounded = self.bounded and 0.0 <= value <= 1.0
                    self.scores.add(float(value))
        self._refresh()

    # ------------------------------------------------------------ what is shown
    def answered(self) -> float:
        """Docs answered so far: the scored ones and the current shard's share."""
        share = min(self._shard_done / self._shard_requests, 1.0) if self._shard_requests else 0
        return self.docs + share * self._shard_docs

    def rates(self) -> str:
        """How fast answers come, the cached ones apart; "" before any shard is scored."""
        seconds = time.perf_counter() - self.started
        cache = self.cache
        if cache.from_cache:
            served = f"{cache.from_cache}/{cache.requests} from cache"
            if not cache.computed:
                return served
            return f"{served}, {rate(cache.computed, seconds, 'req')}"
        if not self.docs:
            return ""
        unit = "tok" if self.token_unit == "tokens" else "char"
        return f"{rate(self.docs, seconds, 'doc')}, {rate(self.tokens, seconds, unit, unit)}"

    def estimate(self) -> str:
        """The running metric with its interval ("" before any score).

        The interval is mean ± z·SE with results.json's SE (module docstring); one doc, or
        values that are all equal, give no spread to estimate it from: values in [0, 1] then
        show the exact Clopper-Pearson bound, others say there is no interval yet.
        """
        n = self.scores.n
        if self.metric is None or n == 0:
            return ""
        value = f"{self.metric} {self.scores.mean:.4f}"
        variance = self.scores.variance
        if not variance:
            seen = "1 doc" if variance is None else f"all {n} equal"
            if not self.bounded:
                return f"{value} ({seen}, no interval yet)"
            # Values in [0, 1] without spread: the exact (Clopper-Pearson) bound on the share
            # of docs that could score otherwise stands in, as the docs promise.
            bound = mean_interval(
                self.scores.mean,
                n,
                value_range=(0.0, 1.0),
                variance=0.0,
                settings=OnlineSettings(use_fpc=False),
            )
            return f"{value} [{bound.lower:.4f}, {bound.upper:.4f}] exact bound ({seen})"
        interval = mean_interval(
            self.scores.mean,
            n,
            value_range=(0.0, 1.0) if self.bounded else (-math.inf, math.inf),
            variance=variance,
            settings=OnlineSettings(use_fpc=False),
        )
        shown = f"{value} [{interval.lower:.4f}, {interval.upper:.4f}]"
        if interval.method.startswith("exact"):
            return f"{shown} exact (few events)"
        if interval.note is not None:
            return f"{shown}† (few docs away from {self._end()}: may cover less than 95 %)"
        return shown

    def _end(self) -> str:
        return "0" if self.scores.mean < 0.5 else "1"

    def time_left(self) -> str:
        """Time left at the pace so far ("" until there is a pace)."""
        done = self.answered()
        if not 0 < done < self.total_docs:
            return ""
        seconds = (time.perf_counter() - self.started) / done * (self.total_docs - done)
        return f"{clock(seconds)} left"

    def plain_line(self) -> str:
        """The line a non-terminal gets."""
        with self._lock:
            parts = [f"{self.task}: {int(self.answered())}/{self.total_docs} docs"]
            parts += [self.rates(), self.time_left(), self.estimate(), self._status()]
        return ", ".join(p for p in parts if p)

    def _status(self) -> str:
        return (self.status() or "") if self.status is not None else ""

    # ------------------------------------------------------------ output
    def _plain(self) -> None:
        self.stream.write(self.plain_line() + "\n")
        self.stream.flush()

    def _plain_every(self) -> None:
        """The timer's thread: a line whenever the timer says, until the task ends."""
        while not self._wait_for_line(self._closed):
            self._plain()

    def _start_live(self) -> None:
        from rich.console import Console
        from rich.live import Live

        console = Console(file=self.stream)
        terminals = (self.stream, sys.stderr, sys.__stderr__, sys.stdout, sys.__stdout__)
        self._live = Live(_Display(self), console=console, refresh_per_second=4)
        self._live.start()  # from here on sys.stdout and sys.stderr print above the display
        self._restore = _route_library_output(console, terminals)

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()

    def close(self) -> None:
        """The task ended: stop the display, or print the last plain line."""
        if not self.enabled or self._closed.is_set():
            return
        self._closed.set()
        if self._live is not None:
            self._live.stop()
            if self._restore is not None:
                self._restore()
        else:
            if self._timer is not None:
                self._timer.join()
            if self.docs:
                self._plain()


class _Display:
    """The terminal display: the bar line, then the numbers, each cut to the console width."""

    BAR_WIDTH = 20
    NAME_WIDTH = 24

    def __init__(self, progress: LiveProgress) -> None:
        self.progress = progress

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        p = self.progress
        with p._lock:
            answered, estimate, rates = p.answered(), p.estimate(), p.rates()
            left, status = p.time_left(), p._status()
        elapsed = clock(time.perf_counter() - p.started)
        line = Table.grid(padding=(0, 1))
        line.add_row(
            Text(p.task, no_wrap=True, overflow="ellipsis"),
            ProgressBar(total=max(p.total_docs, 1), completed=answered, width=self.BAR_WIDTH),
            Text(
                f"{int(answered)}/{p.total_docs} docs in {elapsed}" + (f", {left}" if left else "")
            ),
        )
        line.columns[0].max_width = self.NAME_WIDTH
        yield line
        for text in (", ".join(t for t in (rates, estimate) if t), status):
            if text:
                yield Text("  " + text, no_wrap=True, overflow="ellipsis")


def _route_library_output(console: Any, terminals: tuple[Any, ...]) -> Callable[[], None]:
    """While a live display runs, Python warnings and the records of libraries that log to the
    terminal themselves (transformers' deprecation notices on every `hf` run) go through the
    display's console, above the bar, instead of breaking it: handlers writing to one of
    `terminals` (the streams as they were before the display started) are pointed at the
    console. Returns what undoes that."""
    logging.captureWarnings(True)
    proxy = _ConsoleStream(console)
    swapped: list[tuple[logging.StreamHandler[Any], Any]] = []
    for name in ("", "py.warnings", *LIBRARY_LOGGERS):
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, logging.StreamHandler) and any(
                handler.stream is stream for stream in terminals
            ):
                swapped.append((handler, handler.setStream(proxy)))

    def restore() -> None:
        for handler, stream in swapped:
            handler.setStream(stream)
        logging.captureWarnings(False)

    return restore


class _ConsoleStream:
    """A text stream that prints through a rich console (above its live display)."""

    def __init__(self, console: Any) -> None:
        self.console = console

    def write(self, text: str) -> int:
        if text.strip():
            self.console.print(text.rstrip("\n"), markup=False, highlight=False)
        return len(text)

    def flush(self) -> None:
        """Nothing buffered here: the console writes at once."""
