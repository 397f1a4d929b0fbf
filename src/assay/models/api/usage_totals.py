"""Totals of a paid API's usage as `LM.usage_stats` reports them, and how results add them up.

Plain arithmetic over dicts, kept apart from the API backends so that reporting them imports no
client library: a task's usage is the difference of two readings around it (`usage_delta`), a
run's the sum of its tasks' (`usage_sum`). A cost unknown anywhere stays unknown (None), with
`cost_note` saying why.

It sits in the API client layer, beside the meter that takes the readings (`usage`), because
`UsageStats` is what API backends report; the executors, the run and the results writer that
add readings up all sit above the models.
"""

from __future__ import annotations

from typing import Any

UsageStats = dict[str, int | float | str | None]
"""`LM.usage_stats`: counters (requests, retries, rate_limited, tokens by kind), `cost_usd`,
and the prices the cost used (None where unknown) with where they come from."""

COUNTERS = (
    "requests",
    "retries",
    "rate_limited",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "reasoning_tokens",
    "requests_without_usage",
    "batch_requests",
)
"""The additive members of `UsageStats`, besides `cost_usd`."""

PRICE_KEYS = ("price_in", "price_cached_in", "price_out", "batch_discount", "price_source")
"""The prices a cost used: USD per million tokens, the fraction a batch API takes off (applied
to the `batch_requests`), and where they come from (the model args, or the bundled table's row
with its date and page)."""


def usage_delta(before: UsageStats | None, after: UsageStats | None) -> UsageStats:
    """What happened between two readings of `usage_stats` (empty without a meter). A cost
    unknown at either end is unknown; prices are those of `after`."""
    if after is None:
        return {}
    before = before or {}
    out: UsageStats = {k: _count(after, k) - _count(before, k) for k in COUNTERS}
    cost_after, cost_before = after.get("cost_usd"), before.get("cost_usd", 0.0)
    known = isinstance(cost_after, int | float) and isinstance(cost_before, int | float)
    out["cost_usd"] = round(cost_after - cost_before, 10) if known else None  # type: ignore[operator]
    out.update({k: after.get(k) for k in PRICE_KEYS})
    return out


def usage_sum(parts: list[UsageStats]) -> UsageStats:
    """Several readings added up (tasks into a run); prices kept when all parts agree."""
    parts = [p for p in parts if p]
    if not parts:
        return {}
    out: UsageStats = {k: sum(_count(p, k) for p in parts) for k in COUNTERS}
    costs = [p.get("cost_usd") for p in parts]
    known = [c for c in costs if isinstance(c, int | float)]
    out["cost_usd"] = round(sum(known), 10) if len(known) == len(costs) else None
    for key in PRICE_KEYS:
        values = {p.get(key) for p in parts}
        out[key] = values.pop() if len(values) == 1 else None
    return out


def _count(stats: UsageStats, key: str) -> int | float:
    value = stats.get(key)
    return value if isinstance(value, int | float) else 0


def api_usage_entry(stats: UsageStats) -> dict[str, Any]:
    """What results.json reports of `stats` (a task's or the run's): the counts, `cost_usd`,
    the prices, and `cost_note` when the cost is unknown."""
    entry: dict[str, Any] = dict(stats)
    note = cost_note(stats)
    if note:
        entry["cost_note"] = note
    return entry


def cost_note(stats: UsageStats) -> str | None:
    """Why `cost_usd` is None (None when it is known)."""
    if not stats or stats.get("cost_usd") is not None:
        return None
    if stats.get("price_in") is None or stats.get("price_out") is None:
        return (
            "no price is known for this model: give price_in= and price_out= (USD per million "
            "tokens) in --model-args"
        )
    if stats.get("requests_without_usage"):
        return f"{stats['requests_without_usage']} answer(s) reported no token usage"
    if stats.get("cached_input_tokens") and stats.get("price_cached_in") is None:
        return "the price of cached input tokens is unknown: give price_cached_in= in --model-args"
    return "a batch discount is unknown: give batch_discount= in --model-args"
