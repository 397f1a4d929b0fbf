"""Pacing API calls at the provider's limit: adaptive concurrency and the provider's own signals.

Provider-neutral and pure (no HTTP client, no event loop; time comes from an injected clock), so
any API backend can share it and its behaviour is tested with a fake clock. A backend keeps one
`Pacer` for its lifetime, so what it learned about the provider carries from one call to the next.

- Concurrency is a window that adapts (AIMD): it starts at the `num_concurrent` ceiling, halves
  on an overload signal (429, 529, a timeout) at most once per round of calls (calls that started
  before the last decrease do not decrease it again), and grows by one call per window of clean
  answers, never above the ceiling.
- A server's `retry-after` / `retry-after-ms` holds every new start until then.
- `rpm` / `tpm` / `itpm` / `otpm` given by the user are hard ceilings (`RateLimiter`s). Limits the
  provider announces (OpenAI's `x-ratelimit-limit-requests|tokens`, Anthropic's
  `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-limit`, both per minute) are
  paced the same way, starting from the `remaining` the provider reported; the user's, when
  given, apply as well.
- A 429 without `retry-after` waits for the provider's `reset` (OpenAI's durations like `6m0s`,
  `1.5s`, `20ms`; Anthropic's RFC 3339 times), at most the time one unit of the limit takes to
  come back when the limit is known.
"""

from __future__ import annotations

import math
import re
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Literal

FailureKind = Literal["rate_limited", "overloaded", "timeout", "error"]
"""How a failed call failed: a 429, a 529 (or other overload answer), no answer in time, or
anything else transient (a 5xx, a dropped connection)."""

BURST_SECONDS = 0.5
"""A rate limiter holds at most this many seconds' worth of units, and starts full with them.
Providers enforce a per-minute limit in slices as short as a second (OpenAI: "60,000 requests
per minute may be enforced as 1,000 requests per second"), so a first burst of a minute's
worth would draw 429s caused by the harness's own start; half a second's worth leaves room
for requests of one burst that reach the provider out of order."""


class RateLimiter:
    """A token bucket of `per_minute` units per minute that may go into debt.

    A call reserves its cost at once and waits until the bucket would have refilled to cover it,
    so the long-run rate never exceeds the limit, calls are served in arrival order, and a call
    costing more than the burst still goes through. Reservation has no await in it, so the bucket
    needs no lock and its state survives from one event loop to the next.
    """

    def __init__(
        self,
        per_minute: float,
        clock: Callable[[], float] = time.monotonic,
        level: float | None = None,
    ) -> None:
        if per_minute <= 0:
            raise ValueError(f"rate limit must be positive, got {per_minute}")
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.burst = max(1.0, self.rate * BURST_SECONDS)
        self._clock = clock
        self._level = self.burst if level is None else min(self.burst, level)
        """Units on hand (negative: debt); full unless the caller knows better."""
        self._updated = clock()

    def reserve(self, cost: float) -> float:
        """Take `cost` units; the seconds to wait before using them."""
        now = self._clock()
        self._level = min(self.burst, self._level + (now - self._updated) * self.rate)
        self._updated = now
        self._level -= cost
        return 0.0 if self._level >= 0 else -self._level / self.rate


@dataclass(frozen=True, slots=True)
class ProviderSignals:
    """What one answer's headers say about the provider's limits (None where they are silent).

    Limits are per minute; `*_reset` are seconds from now until the limit is replenished.
    """

    retry_after: float | None = None
    requests_limit: float | None = None
    requests_remaining: float | None = None
    requests_reset: float | None = None
    tokens_limit: float | None = None
    tokens_remaining: float | None = None
    tokens_reset: float | None = None
    input_tokens_limit: float | None = None
    input_tokens_remaining: float | None = None
    output_tokens_limit: float | None = None
    output_tokens_remaining: float | None = None

    def wait_hint(self) -> float | None:
        """Seconds the provider asks a rate-limited caller to wait: `retry-after`, else the
        `reset` of the limit that ran out, at most one unit's time when the limit is known."""
        if self.retry_after is not None:
            return self.retry_after
        candidates = []
        for reset, limit, remaining in (
            (self.requests_reset, self.requests_limit, self.requests_remaining),
            (self.tokens_reset, self.tokens_limit, self.tokens_remaining),
        ):
            if reset is None or (remaining is not None and remaining >= 1):
                continue
            candidates.append(min(reset, 60.0 / limit) if limit else reset)
        return max(candidates) if candidates else None


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> float | None:
    """Seconds in an OpenAI reset duration (`6m0s`, `1.5s`, `20ms`, `1h2m`) or a plain number
    of seconds; None when the text is neither."""
    text = text.strip()
    try:
        value = float(text)
        return value if math.isfinite(value) and value >= 0 else None
    except ValueError:
        pass
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def _seconds_until(text: str, now: float) -> float | None:
    """Seconds from `now` (Unix time) until an RFC 3339 time or an HTTP date (`retry-after`'s
    other form), or a duration; None if none of these."""
    duration = parse_duration(text)
    if duration is not None:
        return duration
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def read_signals(headers: Mapping[str, str], now: float | None = None) -> ProviderSignals:
    """The rate-limit signals of a response's headers (any case), OpenAI's or Anthropic's.

    `now` is the current Unix time (Anthropic's resets are absolute times); default the clock.
    """
    h = {k.lower(): v for k, v in headers.items()}
    now = time.time() if now is None else now
    retry_after = None
    if "retry-after-ms" in h:
        ms = _number(h["retry-after-ms"])
        retry_after = ms / 1000 if ms is not None else None
    if retry_after is None and "retry-after" in h:
        retry_after = _seconds_until(h["retry-after"], now)

    def first(*names: str) -> str | None:
        return next((h[n] for n in names if n in h), None)

    def reset(*names: str) -> float | None:
        value = first(*names)
        return _seconds_until(value, now) if value is not None else None

    return ProviderSignals(
        retry_after=retry_after,
        requests_limit=_number(
            first("x-ratelimit-limit-requests", "anthropic-ratelimit-requests-limit")
        ),
        requests_remaining=_number(
            first("x-ratelimit-remaining-requests", "anthropic-ratelimit-requests-remaining")
        ),
        requests_reset=reset("x-ratelimit-reset-requests", "anthropic-ratelimit-requests-reset"),
        tokens_limit=_number(first("x-ratelimit-limit-tokens", "anthropic-ratelimit-tokens-limit")),
        tokens_remaining=_number(
            first("x-ratelimit-remaining-tokens", "anthropic-ratelimit-tokens-remaining")
        ),
        tokens_reset=reset("x-ratelimit-reset-tokens", "anthropic-ratelimit-tokens-reset"),
        input_tokens_limit=_number(first("anthropic-ratelimit-input-tokens-limit")),
        input_tokens_remaining=_number(first("anthropic-ratelimit-input-tokens-remaining")),
        output_tokens_limit=_number(first("anthropic-ratelimit-output-tokens-limit")),
        output_tokens_remaining=_number(first("anthropic-ratelimit-output-tokens-remaining")),
    )


@dataclass(frozen=True, slots=True)
class Limits:
    """The user's hard ceilings, per minute (None: not limited on that count)."""

    rpm: float | None = None
    tpm: float | None = None
    """Prompt plus requested output tokens."""
    itpm: float | None = None
    otpm: float | None = None


_METERS = ("requests", "tokens", "input", "output")
"""What a limiter counts; a call's cost in each is (1, prompt + max output, prompt, max output)."""


@dataclass(frozen=True, slots=True)
class Ticket:
    """A started call, as the pacer saw it start."""

    epoch: int
    """The window's epoch at the start: an overload seen by a call that started before the
    last decrease does not decrease the window again."""


class Pacer:
    """When API calls may start: concurrency window, provider holds and rate limits.

    Callers ask `reserve` (seconds to wait for the rate limits) then `may_start` (whether a
    slot is free now and no hold is on) before each attempt, `start` when they go, and report
    the end with `succeeded` or `failed`. Counters feed `status` (the live progress fragment).
    """

    RATE_WINDOW_SECONDS = 10.0
    """Answers over this many seconds give the req/s of `status`."""

    def __init__(
        self,
        ceiling: int,
        limits: Limits = Limits(),
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if ceiling < 1:
            raise ValueError(f"concurrency ceiling must be 1 or more, got {ceiling}")
        self.ceiling = ceiling
        self.window = float(ceiling)
        """Calls allowed in flight now (its whole part, at least one)."""
        self.epoch = 0
        self.in_flight = 0
        self.hold_until = 0.0
        """No new call starts before this time (a provider's retry-after)."""
        self.hold_reason = ""
        """What asked for the hold: the provider's `retry-after`, or its limit's reset."""
        self.rate_limited = 0
        """429 and 529 answers so far."""
        self.retries = 0
        self._clock = clock
        self._wall = wall_clock
        self._hard: dict[str, RateLimiter] = {}
        for meter, per_minute in zip(
            _METERS, (limits.rpm, limits.tpm, limits.itpm, limits.otpm), strict=True
        ):
            if per_minute:
                self._hard[meter] = RateLimiter(per_minute, clock)
        self._learned: dict[str, RateLimiter] = {}
        self._answered: deque[float] = deque()

    # -- before a call ----------------------------------------------------------------------

    def reserve(self, prompt_tokens: float, output_tokens: float) -> float:
        """Take a call's units from every rate limit; the seconds to wait before it may go."""
        costs = {
            "requests": 1.0,
            "tokens": prompt_tokens + output_tokens,
            "input": prompt_tokens,
            "output": output_tokens,
        }
        waits = [lim.reserve(costs[m]) for m, lim in (*self._hard.items(), *self._learned.items())]
        return max(waits, default=0.0)

    def allowed(self) -> int:
        """Calls that may be in flight now."""
        return max(1, min(self.ceiling, int(self.window)))

    def hold_remaining(self) -> float:
        """Seconds until the provider's hold lifts (0: none)."""
        return max(0.0, self.hold_until - self._clock())

    def may_start(self) -> bool:
        return self.hold_remaining() <= 0 and self.in_flight < self.allowed()

    def start(self) -> Ticket:
        self.in_flight += 1
        return Ticket(self.epoch)

    def unused(self, ticket: Ticket) -> None:
        """A started call was not sent after all (its slot is free again)."""
        self.in_flight -= 1

    # -- after a call -----------------------------------------------------------------------

    def succeeded(self, ticket: Ticket) -> None:
        """A clean answer: the window grows by one call per window of them."""
        self.in_flight -= 1
        self.window = min(float(self.ceiling), self.window + 1.0 / max(self.window, 1.0))
        now = self._clock()
        self._answered.append(now)
        while self._answered and self._answered[0] < now - self.RATE_WINDOW_SECONDS:
            self._answered.popleft()

    def failed(self, ticket: Ticket, kind: FailureKind, signals: ProviderSignals | None) -> float:
        """A failed call; the least seconds it should wait before its next attempt.

        Overload (429, 529, timeouts) shrinks the window once per round; a provider's
        retry-after (or reset, on a 429) holds every new start as long.
        """
        self.in_flight -= 1
        if kind in ("rate_limited", "overloaded"):
            self.rate_limited += 1
        if kind != "error" and ticket.epoch == self.epoch:
            self.window = max(1.0, self.window / 2)
            self.epoch += 1
        if signals is None:
            return 0.0
        wait = signals.wait_hint() if kind == "rate_limited" else signals.retry_after
        if wait and self._clock() + wait > self.hold_until:
            self.hold_until = self._clock() + wait
            self.hold_reason = f"{'429' if kind == 'rate_limited' else '529'} " + (
                "retry-after" if signals.retry_after is not None else "limit reset"
            )
        return wait or 0.0

    def observe(self, signals: ProviderSignals) -> None:
        """Adopt the limits a provider announces (per minute), starting from what it says
        remains; a changed limit replaces the one learned before."""
        for meter, limit, remaining in (
            ("requests", signals.requests_limit, signals.requests_remaining),
            ("tokens", signals.tokens_limit, signals.tokens_remaining),
            ("input", signals.input_tokens_limit, signals.input_tokens_remaining),
            ("output", signals.output_tokens_limit, signals.output_tokens_remaining),
        ):
            if not limit:
                continue
            known = self._learned.get(meter)
            if known is None or known.per_minute != limit:
                self._learned[meter] = RateLimiter(limit, self._clock, level=remaining)

    def learned_limits(self) -> dict[str, float]:
        """The per-minute limits the provider announced, by what they count."""
        return {meter: lim.per_minute for meter, lim in self._learned.items()}

    # -- what the live display shows --------------------------------------------------------

    def answers_per_second(self) -> float:
        """Clean answers per second over the last `RATE_WINDOW_SECONDS` (0 before any)."""
        # The live display reads this from its own thread: copy first (one C call, so no
        # answer recorded meanwhile can break the iteration).
        answered = tuple(self._answered)
        now = self._clock()
        recent = [t for t in answered if t >= now - self.RATE_WINDOW_SECONDS]
        if not recent:
            return 0.0
        span = max(now - recent[0], 1.0)
        return len(recent) / span

    def status(self) -> str:
        """`conc 12/32 · 9.8 req/s · 429 ×3 · retries 5`, with a hold when one is on
        (`waiting 25 s more (429 retry-after)`: what asked for it, and the time left)."""
        parts = [f"conc {self.allowed()}/{self.ceiling}", f"{self.answers_per_second():.1f} req/s"]
        if self.rate_limited:
            parts.append(f"429 ×{self.rate_limited}")
        if self.retries:
            parts.append(f"retries {self.retries}")
        hold = self.hold_remaining()
        if hold > 0:
            parts.append(f"waiting {hold:.0f} s more ({self.hold_reason})")
        return " · ".join(parts)
