"""The run's bill for the batch API: answers priced at the batch discount, and results.json
saying so (`prices[].batch_discount_applied`)."""

from __future__ import annotations

import json

import pytest
from fixtures.provider_fakes import FakeProviders
from test_secrets import secret_task

from assay.cli.main import main
from assay.run.bill import Bill, bill_line, earlier_invocations


@pytest.fixture
def tasks(tmp_path):
    return secret_task(tmp_path / "tasks")


def test_batch_answers_are_billed_at_the_discount_and_the_bill_says_so(tasks, tmp_path, capsys):
    out = tmp_path / "out"
    with FakeProviders() as fake:
        args = f"model=gpt-test,base_url={fake.openai_url},batch_poll_interval=0.05"
        code = main(
            [
                "run", "--model", "openai-chat",
                "--model-args", f"{args},price_in=1000000,price_out=0,batch_discount=0.5",
                "--batch-api", "--tasks", "secret_gen", "--include-path", str(tasks),
                "--output-dir", str(out), "--no-progress",
            ]
        )  # fmt: skip
    assert code == 0
    bill = json.loads((out / "results.json").read_text())["assay"]["api_usage"]
    (price,) = bill["prices"]
    assert price["batch_discount_applied"] is True and price["batch_requests"] == 4
    assert price["price_source"] == "model args" and bill["batch_requests"] == 4
    # 1 USD per input token, half off.
    assert bill["cost_usd"] == pytest.approx(bill["input_tokens"] * 0.5)
    assert f"{bill['cost_usd']:.6f} USD" in capsys.readouterr().out


def test_an_invocation_found_running_was_killed_and_the_total_is_a_lower_bound(tmp_path):
    results = tmp_path / "results.json"
    share = {"requests": 3, "input_tokens": 9, "output_tokens": 9, "cost_usd": 0.5}
    running = {"date": 1.0, **share, "stopped_by": None, "running": True}
    results.write_text(json.dumps({"assay": {"api_usage": {"invocations": [running]}}}))
    earlier = earlier_invocations(results)
    assert earlier[0]["stopped_by"] == "killed" and "running" not in earlier[0]
    stats = {"requests": 2, "input_tokens": 4, "output_tokens": 4, "cost_usd": 0.25}
    entry = Bill(earlier, 2.0, None).entry([("model", stats)], None, running=False)
    assert entry["requests"] == 5 and entry["cost_usd"] == pytest.approx(0.75)
    assert "lower bound" in entry["bill_note"]
    assert "0.750000 USD over 2 invocations (this one: 2 requests, 0.250000 USD)" in bill_line(
        entry
    )
