"""API answers filed in the response cache as they arrive, a few at a time.

An executor commits a chunk (hundreds of requests) when the backend returns it; an API backend
is paid per answer, so it also files each answer as it arrives, in groups of at most `group`
answers or `window` seconds, whichever comes first. Ctrl-C, `kill -9` or a budget stop then
loses only the requests in flight and the last window's answers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from assay.requests.cache import ResponseCache

WINDOW_SECONDS = 0.5
"""Longest an arrived answer waits before it is committed."""
GROUP = 32
"""Answers committed together at most (one SQLite transaction)."""


class Arrivals:
    """Answers waiting to enter `cache` (see the module docstring)."""

    def __init__(
        self,
        cache: ResponseCache,
        *,
        window: float = WINDOW_SECONDS,
        group: int = GROUP,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cache = cache
        self.window = window
        self.group = group
        self._clock = clock
        self._waiting: list[tuple[str, Any]] = []
        self._since = 0.0

    def add(self, key: str, result: Any) -> None:
        """File one answer; commits the group when it is full or its window has passed."""
        if not self._waiting:
            self._since = self._clock()
        self.cache.arrived(key)  # an agent turn's time is read as its answer arrives
        self._waiting.append((key, result))
        if len(self._waiting) >= self.group or self._clock() - self._since >= self.window:
            self.flush()

    def flush(self) -> None:
        """Commit every waiting answer now."""
        waiting, self._waiting = self._waiting, []
        if waiting:
            self.cache.put_many(waiting)

    async def keep_flushing(self) -> None:
        """Commit every `window` seconds until cancelled, so that answers do not wait for the
        next arrival (the last ones of a chunk whose other requests are slow)."""
        while True:
            await asyncio.sleep(self.window)
            self.flush()
