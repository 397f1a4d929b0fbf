"""Tokens and cost of API calls (assay/models/api/usage.py, assay/models/api/usage_totals.py) and
the --max-cost limit (assay/models/api/budget.py), without a server."""

from __future__ import annotations

import csv
import re
from importlib import resources

import pytest

from assay.models.api.budget import SpendingLimit, spending_limit
from assay.models.api.usage import (
    Prices,
    Usage,
    UsageMeter,
    bundled_prices,
    model_prices,
    openai_usage,
)
from assay.models.api.usage_totals import api_usage_entry, cost_note, usage_delta, usage_sum


def test_openai_usage_reads_cached_and_reasoning_tokens():
    usage = openai_usage(
        {
            "prompt_tokens": 120,
            "completion_tokens": 40,
            "prompt_tokens_details": {"cached_tokens": 100},
            "completion_tokens_details": {"reasoning_tokens": 25},
        }
    )
    assert usage == Usage(120, 40, cached_input_tokens=100, reasoning_tokens=25)
    assert openai_usage({"prompt_tokens": 3, "completion_tokens": 1}) == Usage(3, 1)
    assert openai_usage(None) == Usage(None, None)


def test_cost_bills_cached_input_at_its_own_price_and_unknown_prices_give_none():
    prices = Prices(input=2.0, output=10.0, cached_input=0.5, batch_discount=0.5)
    usage = Usage(1_000_000, 200_000, cached_input_tokens=400_000)
    assert prices.cost(usage) == pytest.approx(0.6 * 2.0 + 0.4 * 0.5 + 0.2 * 10.0)
    assert prices.cost(usage, batch=True) == pytest.approx((1.2 + 0.2 + 2.0) / 2)
    no_cached_price = Prices(input=2.0, output=10.0)
    assert no_cached_price.cost(usage) is None  # never billed at a guessed price
    assert no_cached_price.cost(Usage(1_000_000, 0)) == 2.0
    assert no_cached_price.cost(usage, batch=False) is None
    assert prices.cost(Usage(None, 5)) is None


def test_bundled_table_rows_carry_a_date_and_a_source():
    text = resources.files("assay.models.api").joinpath("prices.csv").read_text("utf-8")
    rows = list(csv.DictReader(line for line in text.splitlines() if not line.startswith("#")))
    assert rows and len(bundled_prices()) == len(rows)
    for row in rows:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row["date"]), row
        assert row["source"].startswith("https://"), row
        assert float(row["price_in"]) > 0 and float(row["price_out"]) > 0


def test_model_args_override_the_table_and_unknown_models_have_no_price():
    listed = bundled_prices()["gpt-4o-mini"]
    assert model_prices("gpt-4o-mini", None, None) == listed
    overridden = model_prices("gpt-4o-mini", 1.0, None)
    assert overridden is not None
    assert (overridden.input, overridden.output) == (1.0, listed.output)
    assert overridden.cached_input == listed.cached_input
    assert "model args" in overridden.source and listed.source in overridden.source
    assert model_prices("my-local-model", None, None) is None
    assert model_prices("my-local-model", 1.0, None) is None  # no output price: unknown
    mine = model_prices("my-local-model", 1.0, 3.0)
    assert mine == Prices(1.0, 3.0, source="model args")


def test_meter_totals_and_the_difference_around_a_task():
    meter = UsageMeter(Prices(input=1.0, output=2.0, cached_input=0.5))
    meter.record(Usage(1000, 100, cached_input_tokens=200, reasoning_tokens=30))
    before = meter.totals()
    meter.record(Usage(2000, 300))
    meter.count_attempts(retries=3, rate_limited=2)
    after = meter.totals()
    task = usage_delta(before, after)
    assert task["requests"] == 1 and task["input_tokens"] == 2000
    assert task["output_tokens"] == 300 and task["retries"] == 3 and task["rate_limited"] == 2
    assert task["cost_usd"] == pytest.approx((2000 * 1.0 + 300 * 2.0) / 1e6)
    assert after["cost_usd"] == pytest.approx((800 + 100 + 200 + 2000 + 600) / 1e6)
    assert meter.most_per_request == pytest.approx(2600 / 1e6)
    run = usage_sum([usage_delta(None, before), task])
    assert run["requests"] == 2 and run["cost_usd"] == pytest.approx(after["cost_usd"])
    assert run["cached_input_tokens"] == 200 and run["reasoning_tokens"] == 30


def test_an_unknown_cost_stays_unknown_and_says_why():
    unpriced = UsageMeter(None)
    unpriced.record(Usage(10, 5))
    stats = unpriced.totals()
    assert stats["cost_usd"] is None and stats["input_tokens"] == 10
    assert "price_in= and price_out=" in (cost_note(stats) or "")
    assert api_usage_entry(stats)["cost_note"] == cost_note(stats)
    priced = UsageMeter(Prices(1.0, 1.0))
    priced.record(Usage(10, 5, cached_input_tokens=4))
    assert "price_cached_in=" in (cost_note(priced.totals()) or "")
    assert usage_sum([usage_delta(None, unpriced.totals()), {"cost_usd": 1.0}])["cost_usd"] is None
    silent = UsageMeter(Prices(1.0, 1.0))
    silent.record(Usage(None, None))
    assert "reported no token usage" in (cost_note(silent.totals()) or "")
    assert "cost_note" not in api_usage_entry(UsageMeter(Prices(1.0, 1.0)).totals())


def test_spending_limit_holds_estimates_in_flight_and_refuses_what_would_pass_it():
    limit = SpendingLimit(1.0)
    assert limit.admit(0.4) and limit.admit(0.4)
    assert not limit.admit(0.4)  # 0.8 held, 0.4 more would pass 1.0
    assert limit.reached
    limit.settle(0.4, 0.1)
    limit.settle(0.4, 0.0)  # failed: costs nothing
    assert limit.spent == pytest.approx(0.1)
    assert not limit.admit(0.1)  # once reached, nothing more is sent in this run


def test_a_run_without_max_cost_makes_no_limit():
    assert spending_limit(None) is None
    limit = spending_limit(2.5)
    assert limit is not None and limit.max_usd == 2.5 and limit.spent == 0
    with pytest.raises(ValueError, match="positive"):
        SpendingLimit(0)
