"""`--max-cost`: the run stops sending API requests before it would spend more than it may.

A run makes one `SpendingLimit` and hands it to every API backend it builds (the model and its
judges), each of which gives it to its `runner.CallRunner` (`spending=`): backends built with
different limits each keep their own, and one without a limit spends freely. Before a request
is first sent, its backend asks `admit` with an estimate of its cost: the dearest answer of
that backend so far, or, before any answer, an upper bound from the request's prompt and its max new tokens at the model's prices. A refused
request is never sent, nor is any after it; those under way finish and are paid for. The limit
counts what this process spends: answers read from the response cache cost nothing, so a re-run
with a larger budget pays only for the rest. An answer whose cost is unknown (the server
reported no token usage) leaves the budget unkeepable: nothing more is sent and the run stops
saying so (`unknown`), never counting it as free.

It sits in the API client layer, which every API backend and judge shares, because the backends
are what ask it; the run, above the models, only makes the limit and passes it down.
"""

from __future__ import annotations

import threading

from assay.errors import ModelError


class SpendingLimit:
    """At most `max_usd` spent, counting answers received and estimates of requests in flight."""

    def __init__(self, max_usd: float) -> None:
        if not max_usd > 0:
            raise ValueError(f"a spending limit must be positive, got {max_usd}")
        self.max_usd = max_usd
        self.spent = 0.0
        """USD of the answers received."""
        self.reached = False
        """True once a request was refused."""
        self.unknown: str | None = None
        """Why the spending is unknown, once an answer's cost was (then nothing more is sent)."""
        self._in_flight = 0.0
        self._lock = threading.Lock()

    def admit(self, estimate: float) -> bool:
        """Whether a request estimated at `estimate` USD may be sent; if so it is held against
        the limit until `settle`."""
        with self._lock:
            if self.reached or self.spent + self._in_flight + estimate > self.max_usd:
                self.reached = True
                return False
            self._in_flight += estimate
            return True

    def settle(self, estimate: float, cost: float | None, unknown: str = "") -> None:
        """An admitted request is over: its estimate is released and its `cost` (0 when it
        failed) is spent; a cost of None is unknown (`unknown` says why) and stops the run."""
        with self._lock:
            self._in_flight = max(0.0, self._in_flight - estimate)
            if cost is None:
                self.unknown = self.unknown or unknown or "an answer's cost is unknown"
                self.reached = True
                return
            self.spent += cost


def spending_limit(max_usd: float | None) -> SpendingLimit | None:
    """The limit of a run's `--max-cost` (None: no limit)."""
    return SpendingLimit(max_usd) if max_usd is not None else None


class CostLimitReached(ModelError):
    """The run's --max-cost stopped it; `partial` holds the answers that arrived (None
    elsewhere), which the executor keeps in the response cache."""

    def __init__(self, message: str, partial: list[object]) -> None:
        super().__init__(message)
        self.partial = partial

    def __reduce__(self):  # keeps the class across Ray's pickling
        return (type(self), (str(self), self.partial))
