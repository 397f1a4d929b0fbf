"""Pacing API calls (assay/models/api/pacing.py) and the runner's waits, with a fake clock.

No server: provider headers are plain dicts, calls are coroutines that raise what a provider's
answers would become.
"""

from __future__ import annotations

import asyncio

import pytest

from assay.models.api.pacing import (
    Limits,
    Pacer,
    ProviderSignals,
    RateLimiter,
    parse_duration,
    read_signals,
)
from assay.models.api.runner import RetryPolicy, TransientFailure, run_calls


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("6m0s", 360.0), ("1.5s", 1.5), ("20ms", 0.02), ("1h2m3.5s", 3723.5), ("2", 2.0)],
)
def test_reset_durations_are_read_as_openai_writes_them(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "5x", "-1", "1.5s later"])
def test_unreadable_durations_are_none(text):
    assert parse_duration(text) is None


def test_openai_headers_give_limits_remaining_and_resets():
    signals = read_signals(
        {
            "X-RateLimit-Limit-Requests": "600",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "6m0s",
            "x-ratelimit-limit-tokens": "150000",
            "x-ratelimit-remaining-tokens": "149000",
            "x-ratelimit-reset-tokens": "400ms",
            "retry-after-ms": "250",
            "retry-after": "1",
        }
    )
    assert signals.retry_after == 0.25  # the precise header wins over the whole seconds
    assert (signals.requests_limit, signals.requests_remaining) == (600, 0)
    assert signals.requests_reset == 360.0
    assert (signals.tokens_limit, signals.tokens_reset) == (150000, pytest.approx(0.4))


def test_anthropic_headers_give_limits_and_absolute_resets():
    now = 1_700_000_000.0  # 2023-11-14T22:13:20Z
    signals = read_signals(
        {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "3",
            "anthropic-ratelimit-requests-reset": "2023-11-14T22:13:32Z",
            "anthropic-ratelimit-input-tokens-limit": "40000",
            "anthropic-ratelimit-output-tokens-limit": "8000",
            "retry-after": "7",
        },
        now=now,
    )
    assert signals.requests_limit == 50 and signals.requests_remaining == 3
    assert signals.requests_reset == pytest.approx(12.0)
    assert (signals.input_tokens_limit, signals.output_tokens_limit) == (40000, 8000)
    assert signals.retry_after == 7.0
    dated = read_signals({"Retry-After": "Tue, 14 Nov 2023 22:13:50 GMT"}, now=now)
    assert dated.retry_after == pytest.approx(30.0)


def test_a_429_without_retry_after_waits_for_one_unit_of_the_limit_that_ran_out():
    # OpenAI's reset is the time until the whole limit is back; one request needs 60/limit s.
    ran_out = ProviderSignals(requests_limit=600, requests_remaining=0, requests_reset=60.0)
    assert ran_out.wait_hint() == pytest.approx(0.1)
    unknown_limit = ProviderSignals(requests_remaining=0, requests_reset=2.5)
    assert unknown_limit.wait_hint() == 2.5
    left = ProviderSignals(requests_limit=600, requests_remaining=5, requests_reset=1.0)
    assert left.wait_hint() is None
    assert ProviderSignals(retry_after=3.0, requests_reset=9.0).wait_hint() == 3.0


def test_rate_limiter_starts_with_half_a_seconds_worth_then_paces_at_the_limit():
    clock = FakeClock()
    limiter = RateLimiter(240.0, clock=clock)  # four per second: a first burst of two
    assert [limiter.reserve(1) for _ in range(2)] == [0.0, 0.0]
    assert limiter.reserve(1) == pytest.approx(0.25)
    assert limiter.reserve(1) == pytest.approx(0.5)
    clock.now = 60.0  # the debt is repaid and the bucket refills, never above its burst
    assert [limiter.reserve(1) for _ in range(3)] == [0.0, 0.0, pytest.approx(0.25)]
    tokens = RateLimiter(6000.0, clock=clock)  # 100 tokens a second, 50 at once
    assert tokens.reserve(150) == pytest.approx(1.0)  # a call above the burst still goes, later
    assert RateLimiter(30.0, clock=clock).burst == 1.0  # never less than one unit
    drained = RateLimiter(600.0, clock=clock, level=0.0)  # a provider said nothing remains
    assert drained.reserve(1) == pytest.approx(0.1)


def test_window_halves_once_per_round_and_grows_back_by_one_per_window_of_answers():
    clock = FakeClock()
    pacer = Pacer(16, clock=clock)
    tickets = [pacer.start() for _ in range(16)]
    assert pacer.allowed() == 16 and not pacer.may_start()
    pacer.failed(tickets[0], "rate_limited", None)
    assert pacer.allowed() == 8
    for ticket in tickets[1:6]:  # the same round's refusals do not halve it again
        pacer.failed(ticket, "rate_limited", None)
    assert pacer.allowed() == 8
    pacer.failed(pacer.start(), "timeout", None)  # a call of the new round does
    assert pacer.allowed() == 4
    pacer.failed(pacer.start(), "error", None)  # a 500 is not an overload signal
    assert pacer.allowed() == 4
    for ticket in tickets[6:]:
        pacer.succeeded(ticket)
    assert pacer.allowed() == 6  # 10 answers: 4 -> 4.25 -> ... about 6.1
    assert pacer.rate_limited == 6 and pacer.in_flight == 0
    for _ in range(500):
        pacer.succeeded(pacer.start())
    assert pacer.allowed() == 16  # never above the ceiling


def test_retry_after_holds_every_start_and_learned_limits_pace_the_calls():
    clock = FakeClock()
    pacer = Pacer(8, clock=clock)
    headers = {"retry-after-ms": "1500", "x-ratelimit-limit-requests": "60"}
    signals = read_signals(headers)
    pacer.observe(signals)
    assert pacer.learned_limits() == {"requests": 60}
    assert pacer.failed(pacer.start(), "rate_limited", signals) == 1.5
    assert not pacer.may_start() and pacer.hold_remaining() == 1.5
    clock.now = 1.5
    assert pacer.may_start()
    # One a second, from a full bucket of one (remaining was not reported).
    assert [pacer.reserve(10, 5) for _ in range(3)] == [0.0, 1.0, 2.0]


def test_user_ceilings_and_provider_limits_both_apply():
    clock = FakeClock()
    pacer = Pacer(4, Limits(rpm=240, tpm=1200), clock=clock)  # 4 requests, 20 tokens a second
    assert pacer.reserve(5, 5) == 0.0
    assert pacer.reserve(5, 5) == pytest.approx(0.5)  # tokens bind before requests
    pacer.observe(
        read_signals({"x-ratelimit-limit-requests": "30", "x-ratelimit-remaining-requests": "0"})
    )
    assert pacer.reserve(0, 0) == pytest.approx(2.0)  # the provider's 30/min, nothing left


def test_status_names_window_rate_refusals_and_retries():
    clock = FakeClock()
    pacer = Pacer(32, clock=clock)
    for k in range(20):
        clock.now = k * 0.5
        pacer.succeeded(pacer.start())
    pacer.failed(pacer.start(), "rate_limited", None)
    pacer.retries = 5
    assert pacer.status() == "conc 16/32 · 2.1 req/s · 429 ×1 · retries 5"


# -- the runner's waits --------------------------------------------------------------------------


def _refused_until(attempts_refused: int, kind="rate_limited"):
    tries: list[int] = []

    async def attempt(i: int) -> str:
        tries.append(i)
        if len(tries) <= attempts_refused:
            raise TransientFailure("HTTP 429: Rate limit reached", 0.001, kind=kind)
        return f"answer {i}"

    return attempt, tries


def test_a_429_storm_longer_than_the_retry_budget_does_not_fail_the_call():
    attempt, tries = _refused_until(12)
    policy = RetryPolicy(max_retries=2, base_delay=0.001, max_delay=0.002)
    outcome = asyncio.run(run_calls(1, attempt, pacer=Pacer(1), retry=policy))
    assert outcome.ok and outcome.answers == ["answer 0"]
    assert len(tries) == 13 and outcome.rate_limited == 12 and outcome.retries == 12


def test_overloaded_529_waits_like_a_429_but_5xx_spend_the_budget():
    attempt, _ = _refused_until(6, kind="overloaded")
    policy = RetryPolicy(max_retries=1, base_delay=0.001, max_delay=0.002)
    assert asyncio.run(run_calls(1, attempt, pacer=Pacer(1), retry=policy)).ok
    attempt, tries = _refused_until(6, kind="error")
    outcome = asyncio.run(run_calls(1, attempt, pacer=Pacer(1), retry=policy))
    assert outcome.failures == {0: "HTTP 429: Rate limit reached (gave up after 2 attempts)"}
    assert len(tries) == 2


def test_waiting_longer_than_max_wait_fails_with_the_fix():
    clock = FakeClock()

    async def attempt(i: int) -> str:
        clock.now += 1.0
        raise TransientFailure("HTTP 429: Rate limit reached", 0.001, kind="rate_limited")

    policy = RetryPolicy(max_retries=0, max_wait=5.0)
    outcome = asyncio.run(run_calls(1, attempt, pacer=Pacer(1), retry=policy, clock=clock))
    reason = outcome.failures[0]
    assert reason.startswith("HTTP 429: Rate limit reached (still refused after waiting 5 s")
    assert "max_wait=5 s" in reason and "raise max_wait in --model-args" in reason
    assert outcome.rate_limited == 5  # attempts at 0, 1, 2, 3, 4 s; the fifth ends at 5 s


def test_a_refused_admission_stops_sending_and_lists_the_rest_as_unsent():
    sent: list[int] = []

    async def attempt(i: int) -> int:
        sent.append(i)
        return i

    outcome = asyncio.run(
        run_calls(10, attempt, pacer=Pacer(1), retry=RetryPolicy(), admit=lambda i: i < 4)
    )
    assert sent == [0, 1, 2, 3] and outcome.answers[:4] == [0, 1, 2, 3]
    assert outcome.unsent == list(range(4, 10)) and not outcome.failures and not outcome.ok
