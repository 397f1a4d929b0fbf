"""A deterministic stopwatch for the agent loop, so tests compare samples byte for byte
without depending on the wall clock: a model turn takes a time derived from its request's
cache key, a tool call a fixed time (both moved by `offset`).

    python steady_stopwatch.py OFFSET ARGS...   # `assay ARGS...` with this stopwatch
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

from assay.run import agents
from assay.run.agents import Stopwatch


class SteadyStopwatch(Stopwatch):
    """Times that depend only on the request (see the module)."""

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def round(self) -> Callable[[str], float]:
        return lambda key: int(key[:5], 16) / 2**16 + self.offset

    def tool(self, measured: float) -> float:
        return 0.125 + self.offset


def untimed_answers(cache: Path) -> int:
    """Answers in the response cache `cache` with no time noted beside them."""
    with sqlite3.connect(cache) as db:
        keys = [
            (f"note:{model}:{key}",)
            for model, key in db.execute("SELECT model, key FROM responses")
        ]
        noted = {row[0] for row in db.execute("SELECT key FROM meta WHERE key LIKE 'note:%'")}
    return sum(key not in noted for (key,) in keys)


if __name__ == "__main__":
    from assay.cli.main import main

    agents.STOPWATCH = SteadyStopwatch(float(sys.argv[1]))
    sys.exit(main(sys.argv[2:]))
