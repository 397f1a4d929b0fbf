"""A task's progress bar: requests answered out of requests asked, with an ETA."""

from __future__ import annotations

import sys


class ProgressBar:
    """A rich progress bar (drawn only on a terminal); its `advance` is an executor's Progress."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.bar = None
        if enabled and sys.stderr.isatty():
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                transient=False,
            )
            self.bar.start()
            self.task = self.bar.add_task(label, total=0)

    def add_total(self, n: int) -> None:
        """`n` more requests to answer."""
        if self.bar:
            self.bar.update(self.task, total=(self.bar.tasks[0].total or 0) + n)

    def advance(self, n: int) -> None:
        """`n` requests answered."""
        if self.bar:
            self.bar.advance(self.task, n)

    def close(self) -> None:
        if self.bar:
            self.bar.stop()
