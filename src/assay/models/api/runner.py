"""Many API calls at once: bounded in flight, rate limited, retried with backoff and jitter.

Backends describe one call (`attempt(i)`) and how to classify its failures; `run_calls` does the
rest (pacing by `pacing.Pacer`: adaptive concurrency, the provider's holds, rate limits) and
reports, per call, either an answer or why there is none. `CallRunner` is what a backend holds:
its pacer, retry policy and usage meter, and `--max-cost` admission against the spending limit
it is built with. None of it knows HTTP clients, so its behaviour is tested without a server.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from assay.errors import ConfigError, ModelError
from assay.models.api.budget import SpendingLimit
from assay.models.api.pacing import FailureKind, Pacer, ProviderSignals, Ticket
from assay.models.api.usage import Usage, UsageMeter
from assay.util.redact import clean_text

R = TypeVar("R")
T = TypeVar("T")


class TransientFailure(Exception):
    """A failure that may pass if the call is repeated: rate limit, server error, lost connection.

    `kind` says which (see `pacing.FailureKind`): a 429 or 529 waits for the provider without
    spending the retry budget; the others spend it.
    """

    def __init__(
        self,
        reason: str,
        retry_after: float | None = None,
        *,
        kind: FailureKind = "error",
        signals: ProviderSignals | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        """Seconds the server asked us to wait, if it said."""
        self.kind: FailureKind = kind
        self.signals = signals
        """The answer's rate-limit headers, when there was an answer."""


RETRYABLE_STATUS = frozenset({408, 409, 429})
"""HTTP statuses worth repeating a request after, besides every 5xx (timeout, conflict, rate
limit); the online calls and the batch items alike."""


def retryable_status(status: int) -> bool:
    """Whether a request answered HTTP `status` may succeed if sent again."""
    return status in RETRYABLE_STATUS or status >= 500


class PermanentFailure(Exception):
    """A failure that repeating the call cannot fix: a rejected request, a missing capability."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class UnreadableAnswer(PermanentFailure):
    """A 200 answer whose body could not be read (not JSON, or not what the SDK expects): it
    was paid for, so it counts as an answer whose usage is unknown; repeating it could pay
    again for the same unreadable answer, so it is not repeated."""


DEFAULT_MAX_WAIT = 1800.0
"""Seconds a call may keep waiting out rate limits (429, 529) from its first attempt."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a failed call is repeated."""

    max_retries: int = 5
    """Repeats after a 5xx, a lost connection or a timeout; 0 never repeats those."""
    base_delay: float = 0.5
    """Seconds before the first retry (before jitter); doubles on every further retry."""
    max_delay: float = 30.0
    max_wait: float = DEFAULT_MAX_WAIT
    """Seconds a call may spend waiting out 429s and 529s, counted from its first attempt;
    those never spend `max_retries`."""

    def backoff(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `retry` (0-based).

        Jitter spreads the retries of calls that failed together (a burst of 429s) so they do not
        return together; a server's Retry-After is honoured up to `max_delay`.
        """
        ceiling = min(self.max_delay, self.base_delay * 2 ** min(retry, 30))
        delay = ceiling / 2 + random.uniform(0.0, ceiling / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_delay))
        return delay

    def rate_limited_wait(self, waits: int, hint: float | None) -> float:
        """Seconds before repeating a call after its `waits`-th rate-limited answer (0-based):
        what the provider asked (up to a fifth more, so calls refused together spread out),
        else the exponential backoff."""
        if hint is not None:
            return hint * random.uniform(1.0, 1.2)
        return self.backoff(waits)


@dataclass
class CallOutcome(Generic[R]):
    """What became of each call: its answer, or the reason it has none."""

    answers: list[R | None]
    failures: dict[int, str] = field(default_factory=dict)
    """Call index to the reason it finally failed."""
    abandoned: list[int] = field(default_factory=list)
    """Calls given up unanswered because another call had already failed for good."""
    unsent: list[int] = field(default_factory=list)
    """Calls never sent because `admit` refused them (a spending limit)."""
    retries: int = 0
    """Attempts repeated after a transient failure, over all calls."""
    rate_limited: int = 0
    """Attempts answered 429 or 529, over all calls."""

    @property
    def ok(self) -> bool:
        return not self.failures and not self.abandoned and not self.unsent


async def run_calls(
    n_calls: int,
    attempt: Callable[[int], Awaitable[R]],
    *,
    pacer: Pacer,
    retry: RetryPolicy,
    cost: Callable[[int], tuple[float, float]] = lambda _i: (0.0, 0.0),
    admit: Callable[[int], bool] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> CallOutcome[R]:
    """Run `attempt(0) ... attempt(n_calls - 1)`, as many at once as `pacer` allows.

    `attempt` raises TransientFailure (repeated) or PermanentFailure (not repeated); anything
    else is a bug and propagates. A rate-limited call (429, 529) waits as the provider asks and
    tries again until `retry.max_wait` has passed since its first attempt; other transient
    failures spend `retry.max_retries`. After the first call that finally fails no new call
    starts, since the run cannot be scored anyway; the outcome lists those calls as abandoned.
    `cost(i)` is call i's (prompt tokens, requested output tokens), for the pacer's token limits.
    `admit(i)`, asked when call i is about to be sent the first time, may refuse it: then no
    further call is sent (they are `unsent`), and those under way finish.
    """
    outcome: CallOutcome[R] = CallOutcome([None] * n_calls)
    pending = iter(range(n_calls))
    slot_freed: list[asyncio.Event] = []
    stop = asyncio.Event()
    """Set when a call failed for good or was refused: every wait ends, nothing more is sent."""

    def stopped() -> bool:
        return bool(outcome.failures or outcome.unsent)

    def check_stop() -> None:
        if stopped():
            stop.set()
            free_slot()

    async def pause(seconds: float) -> None:
        """Sleep `seconds`, or less if the run stops meanwhile."""
        if seconds > 0 and not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), seconds)

    async def take_slot() -> Ticket | None:
        """A slot to send in, or None once the run has stopped."""
        while not pacer.may_start():
            if stop.is_set():
                return None
            hold = pacer.hold_remaining()
            if hold > 0:
                await pause(hold)
                continue
            freed = asyncio.Event()
            slot_freed.append(freed)
            await freed.wait()
        return None if stop.is_set() else pacer.start()

    def free_slot() -> None:
        for event in slot_freed:
            event.set()
        slot_freed.clear()

    async def one(i: int) -> None:
        retries = waits = 0
        first_attempt: float | None = None
        while True:
            if not stopped():
                await pause(pacer.reserve(*cost(i)))
            ticket = await take_slot() if not stopped() else None
            if ticket is None:
                outcome.abandoned.append(i)
                return
            if first_attempt is None:
                # Asked only now, so that estimates held against a limit are those in flight.
                if admit is not None and not admit(i):
                    pacer.unused(ticket)
                    free_slot()
                    outcome.unsent.append(i)
                    check_stop()
                    return
                first_attempt = clock()
            try:
                outcome.answers[i] = await attempt(i)
                pacer.succeeded(ticket)
                return
            except TransientFailure as exc:
                hint = pacer.failed(ticket, exc.kind, exc.signals)
                last = exc
            except PermanentFailure as exc:
                pacer.failed(ticket, "error", None)
                outcome.failures[i] = exc.reason
                check_stop()
                return
            finally:
                free_slot()
            if last.kind in ("rate_limited", "overloaded"):
                outcome.rate_limited += 1
                given = last.retry_after if last.retry_after is not None else hint or None
                delay = retry.rate_limited_wait(waits, given)
                waits += 1
                waited = clock() - first_attempt
                left = retry.max_wait - waited
                if given is not None:
                    delay = min(delay, max(given, left))  # jitter never breaks the budget
                if delay > left:
                    # A wait the run cannot afford is not started: fail now, naming the hold.
                    asked = f"; the provider asks for {given:.3g} s more" if given else ""
                    outcome.failures[i] = (
                        f"{last.reason} (still refused after waiting {waited:.3g} s{asked}, and "
                        f"max_wait={retry.max_wait:g} s allows no more: raise max_wait in "
                        "--model-args, or set rpm=/tpm= to the provider's limits)"
                    )
                    check_stop()
                    return
            else:
                if retries >= retry.max_retries:
                    tries = retries + 1
                    refused = f", besides {waits} rate-limited one(s)" if waits else ""
                    outcome.failures[i] = (
                        f"{last.reason} (gave up after {tries} attempt{'s' * (tries > 1)}{refused})"
                    )
                    check_stop()
                    return
                delay = retry.backoff(retries, last.retry_after)
                retries += 1
            outcome.retries += 1
            pacer.retries += 1
            await pause(delay)

    async def worker() -> None:
        # Workers share one iterator, so each call is taken exactly once. There are more workers
        # than slots so that calls waiting out a backoff do not idle the connection slots.
        for i in pending:
            if stopped():
                (outcome.unsent if outcome.unsent else outcome.abandoned).append(i)
                continue
            await one(i)

    await asyncio.gather(*(worker() for _ in range(min(n_calls, 2 * pacer.ceiling))))
    outcome.abandoned.sort()
    outcome.unsent.sort()
    return outcome


class CallRunner:
    """One backend's calls: paced by its `pacer`, repeated under its `retry` policy, every
    answer's usage counted by its `meter`, and, under a spending limit, each call admitted only
    while the limit allows (estimated at the dearest answer so far, or before any at its prompt
    and max new tokens at the model's prices)."""

    def __init__(
        self,
        name: str,
        pacer: Pacer,
        retry: RetryPolicy,
        meter: UsageMeter,
        *,
        spending: SpendingLimit | None = None,
        model: str = "",
    ) -> None:
        """A limit needs the prices of `model` (the served model, named in the refusal): a
        spending limit for a model whose prices are unknown could not be kept."""
        if spending is not None and meter.prices is None:
            raise ConfigError(
                f"--max-cost needs the prices of --model {name} model={model!r}, which "
                "the bundled price table does not list: give price_in= and price_out= (USD per "
                "million tokens) in --model-args."
            )
        self.name = name
        """The backend's name, in messages."""
        self.pacer = pacer
        self.retry = retry
        self.meter = meter
        self.spending = spending
        """The spending limit every call is admitted under (None: no limit)."""

    async def run(
        self,
        n_calls: int,
        send: Callable[[int], Awaitable[Any]],
        read: Callable[[int, Any], R],
        *,
        usage: Callable[[Any], Usage],
        tokens: Callable[[int], tuple[float, float]],
    ) -> CallOutcome[R]:
        """`read(j, await send(j))` for every call j; `usage(response)` is what the answer used.

        A response's usage is counted (and settled against `spending`) before `read` sees it:
        an answer that arrived is paid for even when it cannot be read. Calls admitted and never
        answered are settled at no cost, whatever ends the run.
        """
        estimates: dict[int, float] = {}
        spending = self.spending

        def paid(j: int, answered: Usage, unknown: str) -> None:
            """Count an answer that arrived; under a limit, settle its estimate at its cost."""
            cost = self.meter.record(answered)
            if spending is not None and j in estimates:
                spending.settle(estimates.pop(j), cost, unknown)

        async def attempt(j: int) -> R:
            try:
                response = await send(j)
            except UnreadableAnswer as exc:
                paid(j, Usage(None, None), f"an answer could not be read ({exc.reason})")
                raise
            answered = usage(getattr(response, "usage", None))
            paid(
                j,
                answered,
                "the server's answers report no token usage"
                if answered.input_tokens is None or answered.output_tokens is None
                else "the price of some of the tokens an answer used is unknown (cached "
                "input tokens without price_cached_in=)",
            )
            try:
                return read(j, response)
            except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
                # A body of the wrong shape (a field missing or of another type): the server's
                # answer is unusable, which repeating the paid call would not change.
                raise PermanentFailure(
                    clean_text(f"the server's answer is malformed: {type(exc).__name__}: {exc}")
                ) from None

        try:
            outcome = await run_calls(
                n_calls,
                attempt,
                pacer=self.pacer,
                retry=self.retry,
                cost=tokens,
                admit=self._admission(spending, tokens, estimates) if spending else None,
            )
        finally:
            if spending is not None:  # calls that never got an answer cost nothing
                for estimate in estimates.values():
                    spending.settle(estimate, 0.0)
        self.meter.count_attempts(outcome.retries, outcome.rate_limited)
        return outcome

    def _admission(
        self,
        spending: SpendingLimit,
        tokens: Callable[[int], tuple[float, float]],
        estimates: dict[int, float],
    ) -> Callable[[int], bool]:
        prices = self.meter.prices
        assert prices is not None  # `check` refused a limit without prices

        def admit(j: int) -> bool:
            estimate = self.meter.most_per_request
            if not estimate:
                prompt, output = tokens(j)
                estimate = (prompt * prices.input + output * prices.output) / 1e6
            if not spending.admit(estimate):
                return False
            estimates[j] = estimate
            return True

        return admit


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
