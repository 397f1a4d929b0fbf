"""Many API calls at once: bounded in flight, rate limited, retried with backoff and jitter.

Backends describe one call (`attempt(i)`) and how to classify its failures; `run_calls` does the
rest and reports, per call, either an answer or why there is none. It knows nothing of HTTP
clients, so its behaviour is tested without a server.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from assay.errors import ModelError

R = TypeVar("R")
T = TypeVar("T")


class TransientFailure(Exception):
    """A failure that may pass if the call is repeated: rate limit, server error, lost connection."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        """Seconds the server asked us to wait, if it said."""


class PermanentFailure(Exception):
    """A failure that repeating the call cannot fix: a rejected request, a missing capability."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a failed call is repeated."""

    max_retries: int = 5
    """Repeats after the first attempt; 0 never retries."""
    base_delay: float = 0.5
    """Seconds before the first retry (before jitter); doubles on every further retry."""
    max_delay: float = 30.0

    def backoff(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `retry` (0-based).

        Jitter spreads the retries of calls that failed together (a burst of 429s) so they do not
        return together; a server's Retry-After is honoured up to `max_delay`.
        """
        ceiling = min(self.max_delay, self.base_delay * 2**retry)
        delay = ceiling / 2 + random.uniform(0.0, ceiling / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_delay))
        return delay


class RateLimiter:
    """A token bucket of `per_minute` units per minute that may go into debt.

    A call reserves its cost at once and waits until the bucket would have refilled to cover it,
    so the long-run rate never exceeds the limit, calls are served in arrival order, and a call
    costing more than the burst still goes through. Reservation has no await in it, so the bucket
    needs no lock and its state survives from one event loop to the next.
    """

    def __init__(self, per_minute: float, clock: Callable[[], float] = time.monotonic) -> None:
        if per_minute <= 0:
            raise ValueError(f"rate limit must be positive, got {per_minute}")
        self.rate = per_minute / 60.0
        self.burst = max(1.0, per_minute / 6.0)
        """Ten seconds' worth of units may be spent at once."""
        self._clock = clock
        self._level = self.burst
        self._updated = clock()

    def reserve(self, cost: float) -> float:
        """Take `cost` units; the seconds to wait before using them."""
        now = self._clock()
        self._level = min(self.burst, self._level + (now - self._updated) * self.rate)
        self._updated = now
        self._level -= cost
        return 0.0 if self._level >= 0 else -self._level / self.rate


@dataclass
class CallOutcome(Generic[R]):
    """What became of each call: its answer, or the reason it has none."""

    answers: list[R | None]
    failures: dict[int, str] = field(default_factory=dict)
    """Call index to the reason it finally failed."""
    abandoned: list[int] = field(default_factory=list)
    """Calls given up unanswered because another call had already failed for good."""
    retries: int = 0
    """Attempts repeated after a transient failure, over all calls."""

    @property
    def ok(self) -> bool:
        return not self.failures and not self.abandoned


async def run_calls(
    n_calls: int,
    attempt: Callable[[int], Awaitable[R]],
    *,
    concurrency: int,
    retry: RetryPolicy,
    limits: Sequence[tuple[RateLimiter, Callable[[int], float]]] = (),
) -> CallOutcome[R]:
    """Run `attempt(0) ... attempt(n_calls - 1)` with at most `concurrency` in flight.

    `attempt` raises TransientFailure (retried) or PermanentFailure (not retried); anything else
    is a bug and propagates. After the first call that finally fails no new call starts, since
    the run cannot be scored anyway; the outcome lists those calls as abandoned. `limits` pairs each
    rate limiter with the cost of a call in its units (1 per request, or estimated tokens).
    """
    outcome: CallOutcome[R] = CallOutcome([None] * n_calls)
    in_flight = asyncio.Semaphore(concurrency)
    pending = iter(range(n_calls))

    async def one(i: int) -> None:
        last: TransientFailure | None = None
        for n in range(retry.max_retries + 1):
            if outcome.failures:
                outcome.abandoned.append(i)
                return
            for limiter, cost in limits:
                await asyncio.sleep(limiter.reserve(cost(i)))
            async with in_flight:
                try:
                    outcome.answers[i] = await attempt(i)
                    return
                except TransientFailure as exc:
                    last = exc
                except PermanentFailure as exc:
                    outcome.failures[i] = exc.reason
                    return
            if n < retry.max_retries:
                outcome.retries += 1
                await asyncio.sleep(retry.backoff(n, last.retry_after))
        assert last is not None
        tries = retry.max_retries + 1
        outcome.failures[i] = f"{last.reason} (gave up after {tries} attempt{'s' * (tries > 1)})"

    async def worker() -> None:
        # Workers share one iterator, so each call is taken exactly once. There are more workers
        # than slots so that calls waiting out a backoff do not idle the connection slots.
        for i in pending:
            if outcome.failures:
                outcome.abandoned.append(i)
                continue
            await one(i)

    await asyncio.gather(*(worker() for _ in range(min(n_calls, 2 * concurrency))))
    outcome.abandoned.sort()
    return outcome


class APIRequestError(ModelError):
    """Some requests to a model API failed for good; the task must not be scored.

    `failures` maps the index of each failed request (in the list the backend was given) to the
    reason; `partial` holds the answers that did arrive, None elsewhere.
    """

    def __init__(
        self,
        summary: str,
        failures: dict[int, str],
        abandoned: Sequence[int],
        partial: list[Any],
        hint: str = "",
    ) -> None:
        shown = sorted(failures.items())[:5]
        lines = "; ".join(f"request {i}: {reason.rstrip('. ')}" for i, reason in shown)
        more = f" (and {len(failures) - len(shown)} more)" if len(failures) > len(shown) else ""
        skipped = (
            f" {len(abandoned)} other request(s) were abandoned after the first failure."
            if abandoned
            else ""
        )
        hint = f" {hint}" if hint else ""
        super().__init__(f"{summary}: {lines}{more}.{skipped}{hint}")
        self.failures = dict(failures)
        self.abandoned = list(abandoned)
        self.partial = partial
        self._parts = (summary, self.failures, self.abandoned, partial, hint.strip())

    def __reduce__(self):  # keeps the class and its fields across Ray's pickling
        return (type(self), self._parts)


def run_sync(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion from synchronous code.

    Inside a thread that already runs an event loop (a notebook, an async caller) the coroutine
    gets a private loop on a helper thread, since a running loop cannot be re-entered.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()
