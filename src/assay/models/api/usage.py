"""What API calls used and cost: tokens by kind, requests, and USD at known prices.

Provider-neutral: a backend turns each answer's usage into a `Usage` (OpenAI's shape is read by
`openai_usage`) and records it in its `UsageMeter`; `LM.usage_stats` returns the meter's
running totals, which results.json reports per task (their difference around the task) and per
run (`usage_totals`). `input_tokens` counts every prompt token, cached ones included;
`reasoning_tokens` are part of `output_tokens` (as OpenAI bills them).

Prices are USD per million tokens: the model args `price_in`, `price_out`, `price_cached_in`
and `batch_discount`, else the bundled table `prices.csv` (each row with its date and source).
An unknown price leaves the cost None, never a guess; `cost_note` says why.
"""

from __future__ import annotations

import csv
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from assay.models.api.usage_totals import COUNTERS, UsageStats

PRICES_FILE = "prices.csv"


@dataclass(frozen=True, slots=True)
class Usage:
    """The tokens one answer used, as the provider reported them (None: not reported)."""

    input_tokens: int | None
    output_tokens: int | None
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0


def openai_usage(usage: Any) -> Usage:
    """The `usage` of an OpenAI-shaped answer (object or dict); None fields when absent."""

    def get(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)

    if usage is None:
        return Usage(None, None)
    prompt_details = get(usage, "prompt_tokens_details")
    completion_details = get(usage, "completion_tokens_details")
    return Usage(
        input_tokens=get(usage, "prompt_tokens"),
        output_tokens=get(usage, "completion_tokens"),
        cached_input_tokens=(get(prompt_details, "cached_tokens") if prompt_details else 0) or 0,
        reasoning_tokens=(
            (get(completion_details, "reasoning_tokens") if completion_details else 0) or 0
        ),
    )


@dataclass(frozen=True, slots=True)
class Prices:
    """USD per million tokens of one model."""

    input: float
    output: float
    cached_input: float | None = None
    """None: unknown (a cost with cached tokens is then unknown too)."""
    batch_discount: float | None = None
    """Fraction taken off through the provider's batch API (0.5: half price); None: unknown."""
    source: str = "model args"
    """Where the prices come from: the model args, or the bundled table's date and URL."""

    def cost(self, usage: Usage, batch: bool = False) -> float | None:
        """USD of one answer's usage; None when a price it needs is unknown."""
        if usage.input_tokens is None or usage.output_tokens is None:
            return None
        cached = usage.cached_input_tokens
        if cached and self.cached_input is None:
            return None
        usd = (
            (usage.input_tokens - cached) * self.input
            + cached * (self.cached_input or 0.0)
            + usage.output_tokens * self.output
        ) / 1e6
        if batch:
            if self.batch_discount is None:
                return None
            usd *= 1.0 - self.batch_discount
        return usd


@cache
def bundled_prices() -> dict[str, Prices]:
    """The bundled price table, by exact model id."""
    text = resources.files("assay.models.api").joinpath(PRICES_FILE).read_text("utf-8")
    rows = csv.DictReader(line for line in text.splitlines() if not line.startswith("#"))

    def number(value: str) -> float | None:
        return float(value) if value.strip() else None

    return {
        row["model"]: Prices(
            input=float(row["price_in"]),
            output=float(row["price_out"]),
            cached_input=number(row["price_cached_in"]),
            batch_discount=number(row["batch_discount"]),
            source=f"bundled table ({row['date']}, {row['source']})",
        )
        for row in rows
    }


def model_prices(
    model: str,
    price_in: float | None,
    price_out: float | None,
    price_cached_in: float | None = None,
    batch_discount: float | None = None,
) -> Prices | None:
    """The prices of `model`: the model args where given, the bundled row for the rest; None
    when the input or output price is known from neither."""
    row = bundled_prices().get(model)
    given_in = price_in if price_in is not None else (row.input if row else None)
    given_out = price_out if price_out is not None else (row.output if row else None)
    if given_in is None or given_out is None:
        return None
    from_args = any(v is not None for v in (price_in, price_out, price_cached_in, batch_discount))
    source = row.source if row and not from_args else "model args"
    if row and from_args and (price_in is None or price_out is None):
        source = f"model args and the {row.source}"
    return Prices(
        input=given_in,
        output=given_out,
        cached_input=price_cached_in
        if price_cached_in is not None
        else (row.cached_input if row else None),
        batch_discount=batch_discount
        if batch_discount is not None
        else (row.batch_discount if row else None),
        source=source,
    )


class UsageMeter:
    """Running totals of one backend's API usage and cost.

    Written by the backend's event loop, read by the live display's thread: `record` and
    `totals` take a lock, so a reading never mixes two answers.
    """

    def __init__(self, prices: Prices | None) -> None:
        self.prices = prices
        self._counts = dict.fromkeys(COUNTERS, 0)
        self._cost: float | None = 0.0 if prices is not None else None
        self._most_per_request = 0.0
        self._lock = threading.Lock()

    def record(self, usage: Usage, batch: bool = False) -> float | None:
        """Add one answered request; returns its cost (None when unknown)."""
        cost = self.prices.cost(usage, batch) if self.prices is not None else None
        with self._lock:
            c = self._counts
            c["requests"] += 1
            c["batch_requests"] += batch
            if usage.input_tokens is None or usage.output_tokens is None:
                c["requests_without_usage"] += 1
            c["input_tokens"] += usage.input_tokens or 0
            c["output_tokens"] += usage.output_tokens or 0
            c["cached_input_tokens"] += usage.cached_input_tokens
            c["reasoning_tokens"] += usage.reasoning_tokens
            if cost is None:
                self._cost = None
            elif self._cost is not None:
                self._cost += cost
                self._most_per_request = max(self._most_per_request, cost)
        return cost

    def count_attempts(self, retries: int, rate_limited: int) -> None:
        """Add the repeated attempts and rate-limited answers of a batch of calls."""
        with self._lock:
            self._counts["retries"] += retries
            self._counts["rate_limited"] += rate_limited

    @property
    def most_per_request(self) -> float:
        """The dearest answer so far, in USD (0 before any)."""
        return self._most_per_request

    def totals(self) -> UsageStats:
        """The running totals, `cost_usd` and the prices used (see `UsageStats`)."""
        with self._lock:
            out: UsageStats = dict(self._counts)
            out["cost_usd"] = self._cost
        p = self.prices
        out["price_in"] = p.input if p else None
        out["price_cached_in"] = p.cached_input if p else None
        out["price_out"] = p.output if p else None
        out["batch_discount"] = p.batch_discount if p else None
        out["price_source"] = p.source if p else None
        return out
