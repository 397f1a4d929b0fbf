"""The run's bill: what its API requests cost, in this invocation and across every invocation
of the same run (a run stopped by --max-cost, Ctrl-C or an error, then resumed into the same
output folder).

results.json's `assay.api_usage` holds the totals over all invocations (counters, `cost_usd`,
`cost_note` when unknown), `stopped_by` (budget, interrupt, error; null for a run that
finished), `prices` (per priced model: its prices, where they come from, whether the batch
discount applied) and `invocations` (each invocation's own share; the last is this one). This
invocation's share is read from the backends' meters, so it counts every answered request,
those of a task that did not finish included. An invocation is recorded as `running` while it
runs; one found so by the next invocation ended without a word (`kill -9`): its share counts up
to its last write, and the bill says so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from assay.models.api.budget import CostLimitReached, SpendingLimit
from assay.models.api.usage_totals import (
    PRICE_KEYS,
    UsageStats,
    api_usage_entry,
    cost_note,
    usage_delta,
    usage_sum,
)

Reading = tuple[str, UsageStats | None]
"""Whose usage (`model` or `judge <model>`) and its reading (None: not metered here)."""

_SHARE_KEYS = (
    "requests",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "reasoning_tokens",
    "requests_without_usage",
    "batch_requests",
    "retries",
    "rate_limited",
)
KILLED_NOTE = (
    "an earlier invocation ended without a word (killed): its spend is counted up to the last "
    "time it wrote results.json, so the total is a lower bound"
)


def stopped_by(exc: BaseException, limit: SpendingLimit | None) -> str:
    """What stopped an invocation that raised `exc` under the run's spending `limit`: budget,
    interrupt or error."""
    if isinstance(exc, CostLimitReached) or (limit is not None and limit.reached):
        return "budget"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupt"
    return "error"


def earlier_invocations(results: Path | None) -> list[dict[str, Any]]:
    """The invocations an earlier results.json of this run records (none without one)."""
    if results is None or not results.is_file():
        return []
    try:
        data = json.loads(results.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    usage = data.get("assay", {}).get("api_usage") if isinstance(data, dict) else None
    if not isinstance(usage, dict):
        return []
    listed = usage.get("invocations")
    if not isinstance(listed, list):  # written before invocations were recorded
        share = {k: usage.get(k) for k in (*_SHARE_KEYS, "cost_usd")}
        return [{"date": data.get("date"), **share, "stopped_by": None}]
    out = []
    for entry in listed:
        if isinstance(entry, dict):
            entry = dict(entry)
            if entry.pop("running", False):
                entry["stopped_by"] = "killed"
            out.append(entry)
    return out


class Bill:
    """The bill of one invocation of a run, with the invocations before it."""

    def __init__(self, earlier: list[dict[str, Any]], date: float, model_before: UsageStats | None):
        self.earlier = earlier
        self.date = date
        self.model_before = model_before
        """The evaluated model's reading when the invocation started (a model passed in may
        have been used before)."""

    def entry(
        self, readings: Sequence[Reading], stopped: str | None, running: bool
    ) -> dict[str, Any]:
        """results.json's `assay.api_usage` (empty when no API was metered, now or before)."""
        parts: list[UsageStats] = []
        prices = []
        for who, reading in readings:
            if reading is None:
                continue
            share = usage_delta(self.model_before, reading) if who == "model" else reading
            parts.append(share)
            if reading.get("price_in") is not None:
                prices.append(_price_row(who, reading))
        mine = usage_sum(parts)
        if not mine and not self.earlier:
            return {}
        this = {"date": self.date, **_share(mine), "stopped_by": stopped}
        note = cost_note(mine)
        if note:
            this["cost_note"] = note
        if running:
            this["running"] = True
        invocations = [*self.earlier, this]
        total: dict[str, Any] = {
            k: sum(_number(i.get(k)) for i in invocations) for k in _SHARE_KEYS
        }
        costs = [i.get("cost_usd") for i in invocations]
        known = [c for c in costs if isinstance(c, int | float)]
        total["cost_usd"] = round(sum(known), 10) if len(known) == len(costs) else None
        total.update({k: mine.get(k) for k in PRICE_KEYS} if mine else {})
        out = api_usage_entry(total)
        if out["cost_usd"] is None and "cost_note" not in out:
            notes = [str(i["cost_note"]) for i in invocations if i.get("cost_note")]
            out["cost_note"] = notes[0] if notes else "an earlier invocation's cost is unknown"
        if any(i.get("stopped_by") == "killed" for i in invocations):
            out["bill_note"] = KILLED_NOTE
        out["stopped_by"] = stopped
        out["prices"] = prices
        out["invocations"] = invocations
        return out


def bill_line(entry: dict[str, Any]) -> str | None:
    """The bill in one terminal line (None without API usage)."""
    if not entry:
        return None
    invocations = entry.get("invocations") or []
    total = _money(entry)
    text = f"API usage: {entry.get('requests')} requests, {_tokens(entry)}, {total}"
    if len(invocations) > 1:
        this = invocations[-1]
        text += (
            f" over {len(invocations)} invocations (this one: {this.get('requests')} requests, "
            f"{_money(this)})"
        )
    if entry.get("bill_note"):
        text += f"; {entry['bill_note']}"
    sources = sorted({str(p["price_source"]) for p in entry.get("prices") or []})
    if sources:
        text += f"; prices from {' and '.join(sources)}"
    if entry.get("stopped_by"):
        text += f"; stopped by {_STOPS.get(str(entry['stopped_by']), entry['stopped_by'])}"
    return text


_STOPS = {"budget": "--max-cost", "interrupt": "an interrupt", "error": "an error"}


def _money(entry: dict[str, Any]) -> str:
    cost = entry.get("cost_usd")
    if isinstance(cost, int | float):
        return f"{cost:.6f} USD"
    return f"cost unknown ({entry.get('cost_note') or 'no price or no usage'})"


def _tokens(entry: dict[str, Any]) -> str:
    return f"{entry.get('input_tokens')} / {entry.get('output_tokens')} tokens in / out"


def _share(stats: UsageStats) -> dict[str, Any]:
    return {**{k: stats.get(k, 0) for k in _SHARE_KEYS}, "cost_usd": stats.get("cost_usd", 0.0)}


def _number(value: Any) -> int | float:
    return value if isinstance(value, int | float) else 0


def _price_row(who: str, reading: UsageStats) -> dict[str, Any]:
    """Where one model's prices come from, and whether its batch discount applied."""
    batch = _number(reading.get("batch_requests"))
    return {
        "of": who,
        **{k: reading.get(k) for k in PRICE_KEYS},
        "batch_requests": batch,
        "batch_discount_applied": bool(batch) and reading.get("batch_discount") is not None,
    }
