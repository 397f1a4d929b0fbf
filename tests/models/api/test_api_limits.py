"""API models at a provider's limit, against the rate-limited loopback server
(fixtures/limited_server.py): adaptive concurrency, 429 storms, max_wait, usage and cost in
results.json, and --max-cost with its resume from the cache. Each test takes a few seconds."""

from __future__ import annotations

import json

import pytest
from fixtures.json_tasks import generate_yaml, write_task
from fixtures.limited_server import LimitedServer

from assay.cli.main import main
from assay.models.api.openai import OpenAIChatLM
from assay.models.api.runner import APIRequestError
from assay.requests.types import GenerateRequest, GenParams

REQUESTS = [
    GenerateRequest(f"please answer question number {i}", GenParams(until=(), max_gen_toks=8))
    for i in range(20)
]


def _answers(server: LimitedServer, **args) -> tuple[list[str], OpenAIChatLM]:
    lm = OpenAIChatLM(model="m", base_url=server.base_url, **args)
    texts = [a if isinstance(a, str) else a.text for a in lm.generate_until(REQUESTS)]
    return texts, lm


@pytest.fixture(scope="module")
def unlimited_answers():
    with LimitedServer() as server:
        answers, _ = _answers(server, num_concurrent=8)
    assert answers[3] == "echo: question number 3"
    return answers


def test_without_rpm_a_tight_limit_is_found_and_every_answer_arrives(unlimited_answers):
    with LimitedServer(rpm=240, burst=2) as server:
        answers, lm = _answers(server, num_concurrent=8)
    assert answers == unlimited_answers
    stats = lm.usage_stats()
    # The first burst met the limit; the headers then paced the rest.
    assert server.rate_limited >= 1 and stats["rate_limited"] == server.rate_limited
    assert stats["requests"] == 20 and lm._calls.pacer.learned_limits() == {"requests": 240}
    assert server.rate_limited < 20  # a few at the start, not one per request


def test_without_any_header_the_window_shrinks_to_what_the_server_takes(unlimited_answers):
    with LimitedServer(max_in_flight=2, latency=0.05) as server:
        answers, lm = _answers(server, num_concurrent=16)
    assert answers == unlimited_answers
    assert server.rate_limited >= 1 and lm._calls.pacer.allowed() < 16


def test_with_rpm_the_first_burst_and_the_rest_stay_under_the_limit(unlimited_answers):
    with LimitedServer(rpm=240, burst=4) as server:
        answers, lm = _answers(server, num_concurrent=8, rpm=240)
    assert answers == unlimited_answers
    assert server.rate_limited <= 1  # under 5 % of 20
    assert lm.usage_stats()["retries"] == server.rate_limited


def test_a_429_storm_longer_than_the_retry_budget_no_longer_fails_the_run(unlimited_answers):
    # The first 15 requests are refused: more than max_retries + 1 = 3 attempts of any request.
    with LimitedServer(storm=15) as server:
        answers, lm = _answers(server, num_concurrent=2, max_retries=2)
    assert answers == unlimited_answers
    assert lm.usage_stats()["rate_limited"] == 15 == server.rate_limited


def test_waiting_past_max_wait_fails_with_the_fix():
    with LimitedServer(storm=10**9) as server:
        lm = OpenAIChatLM(model="m", base_url=server.base_url, max_wait=0.3, num_concurrent=1)
        with pytest.raises(APIRequestError) as err:
            lm.generate_until(REQUESTS[:2])
    text = str(err.value)
    assert "HTTP 429" in text and "max_wait=0.3 s allows no more" in text
    assert "raise max_wait in --model-args" in text


# -- assay run: usage in results.json, --max-cost -------------------------------------------------


QUESTIONS = [f"what is item {i}" for i in range(6)]


@pytest.fixture
def tasks(tmp_path):
    rows = [{"q": q, "a": "echo: " + " ".join(q.split()[-3:])} for q in QUESTIONS]
    return write_task(tmp_path / "tasks", generate_yaml("limited_gen"), rows)


def _run(server, tasks, out, model_args: str, *extra: str) -> int:
    return main(
        [
            "run", "--model", "openai-chat",
            "--model-args", f"model=m,base_url={server.base_url},num_concurrent=1,{model_args}",
            "--tasks", "limited_gen", "--include-path", str(tasks),
            "--output-dir", str(out), "--no-progress", *extra,
        ]
    )  # fmt: skip


def test_usage_and_cost_land_in_results_json(tasks, tmp_path):
    prices = "price_in=2,price_cached_in=0.5,price_out=10"
    with LimitedServer(cached_tokens=3, reasoning_tokens=5) as server:
        assert _run(server, tasks, tmp_path / "out", prices) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    # The server counts words: each prompt's, and each answer's plus its reasoning tokens.
    prompt = [len(q.split()) for q in QUESTIONS]
    output = [len(("echo: " + " ".join(q.split()[-3:])).split()) + 5 for q in QUESTIONS]
    cached = [min(3, n) for n in prompt]
    cost = sum((p - c) * 2 + c * 0.5 + o * 10 for p, c, o in zip(prompt, cached, output)) / 1e6
    task = results["assay"]["requests"]["limited_gen"]["api"]
    assert task["requests"] == 6 and task["retries"] == 0 and task["rate_limited"] == 0
    assert task["input_tokens"] == sum(prompt) and task["output_tokens"] == sum(output)
    assert task["cached_input_tokens"] == sum(cached) and task["reasoning_tokens"] == 30
    assert task["cost_usd"] == pytest.approx(cost)
    assert (task["price_in"], task["price_cached_in"], task["price_out"]) == (2, 0.5, 10)
    run = results["assay"]["api_usage"]
    assert run["cost_usd"] == pytest.approx(cost) and run["requests"] == 6


def test_unknown_prices_give_a_null_cost_with_a_note(tasks, tmp_path):
    with LimitedServer() as server:
        assert _run(server, tasks, tmp_path / "out", "seed=1") == 0
    run = json.loads((tmp_path / "out" / "results.json").read_text())["assay"]["api_usage"]
    assert run["cost_usd"] is None and "price_in= and price_out=" in run["cost_note"]
    assert run["input_tokens"] == sum(len(q.split()) for q in QUESTIONS)


def test_max_cost_stops_the_run_and_a_larger_budget_resumes_from_the_cache(tasks, tmp_path, capsys):
    # Each answer is 4 output tokens at 0.1 USD per token (prompts are free): 0.4 USD.
    prices = "price_in=0,price_out=100000"
    out = tmp_path / "out"
    with LimitedServer() as server:
        assert _run(server, tasks, out, prices, "--max-cost", "1.3") == 2
        err = capsys.readouterr().err
        assert "--max-cost 1.3 USD reached" in err and "re-run with a larger --max-cost" in err
        assert "Traceback" not in err
        # The first request's bound (8 new tokens: 0.8) and then 0.4 per answer: 3 fit in 1.3.
        assert len(server.answered) == 3
        # The stopped run records all it paid for (no task finished) and what stopped it.
        stopped = json.loads((out / "results.json").read_text())["assay"]
        assert stopped["stopped_by"] == "budget" and stopped["api_usage"]["stopped_by"] == "budget"
        assert stopped["api_usage"]["requests"] == 3
        assert stopped["api_usage"]["cost_usd"] == pytest.approx(1.2)
        assert "API usage: 3 requests, 12 / 12 tokens in / out, 1.200000 USD" in err
        assert "stopped by --max-cost" in err
        assert _run(server, tasks, out, prices, "--max-cost", "5") == 0
        assert len(server.answered) == 6  # only the three the first run did not pay for
    printed = capsys.readouterr().out
    assert "2.400000 USD over 2 invocations (this one: 3 requests, 1.200000 USD)" in printed
    run = json.loads((out / "results.json").read_text())["assay"]["api_usage"]
    # The total across both invocations, and each invocation's share.
    assert run["requests"] == 6 and run["cost_usd"] == pytest.approx(2.4)
    assert run["stopped_by"] is None
    shares = [(i["requests"], i["cost_usd"], i["stopped_by"]) for i in run["invocations"]]
    assert shares == [(3, pytest.approx(1.2), "budget"), (3, pytest.approx(1.2), None)]
    assert run["prices"] == [
        {"of": "model", "price_in": 0, "price_cached_in": None, "price_out": 100000,
         "batch_discount": None, "price_source": "model args", "batch_requests": 0,
         "batch_discount_applied": False}
    ]  # fmt: skip


def test_a_bundled_price_row_is_named_with_its_date(tasks, tmp_path):
    with LimitedServer() as server:
        code = main(
            [
                "run", "--model", "openai-chat",
                "--model-args", f"model=gpt-4o,base_url={server.base_url},num_concurrent=1",
                "--tasks", "limited_gen", "--include-path", str(tasks),
                "--output-dir", str(tmp_path / "out"), "--no-progress",
            ]
        )  # fmt: skip
    assert code == 0
    run = json.loads((tmp_path / "out" / "results.json").read_text())["assay"]["api_usage"]
    (price,) = run["prices"]
    assert price["price_source"].startswith("bundled table (2025-08-07, https://openai.com")
    assert price["batch_discount"] == 0.5 and price["batch_discount_applied"] is False


def test_max_cost_with_answers_that_report_no_usage_stops_and_never_exits_0(
    tasks, tmp_path, capsys
):
    out = tmp_path / "out"
    with LimitedServer(no_usage=True) as server:
        code = _run(server, tasks, out, "price_in=1,price_out=1", "--max-cost", "100")
        sent = server.requests
    err = capsys.readouterr().err
    assert code == 2 and "cannot be kept" in err and "report no token usage" in err
    assert "0.000000" not in err and "Traceback" not in err
    assert sent == 1  # nothing sent after the first answer without usage
    assert "cost unknown (1 answer(s) reported no token usage)" in err
    run = json.loads((out / "results.json").read_text())["assay"]["api_usage"]
    assert run["cost_usd"] is None and run["cost_note"] == "1 answer(s) reported no token usage"
    assert run["stopped_by"] == "budget" and run["requests"] == 1


def test_answers_without_usage_give_an_unknown_cost_never_zero(tasks, tmp_path, capsys):
    with LimitedServer(no_usage=True) as server:
        assert _run(server, tasks, tmp_path / "out", "price_in=1,price_out=1") == 0
    assert "cost unknown (6 answer(s) reported no token usage)" in capsys.readouterr().out
    run = json.loads((tmp_path / "out" / "results.json").read_text())["assay"]["api_usage"]
    assert run["cost_usd"] is None and run["invocations"][0]["cost_usd"] is None


def test_max_cost_without_prices_is_refused_before_any_request(tasks, tmp_path, capsys):
    with LimitedServer() as server:
        assert _run(server, tasks, tmp_path / "out", "seed=1", "--max-cost", "1") == 2
        assert server.requests == 0
    err = capsys.readouterr().err
    assert "--max-cost needs the prices" in err and "price_in= and price_out=" in err


def test_compare_and_report_show_each_runs_requests_tokens_and_cost(tasks, tmp_path, capsys):
    with LimitedServer() as server:
        for name, prices in (("cheap", "price_in=1,price_out=2"), ("unpriced", "seed=1")):
            assert _run(server, tasks, tmp_path / name, f"{prices}", "--log-samples") == 0
    capsys.readouterr()
    runs = [str(tmp_path / "cheap"), str(tmp_path / "unpriced")]
    assert main(["compare", *runs]) == 0
    printed = capsys.readouterr().out
    tokens_in = sum(len(q.split()) for q in QUESTIONS)
    tokens_out = 4 * len(QUESTIONS)
    cost = (tokens_in * 1 + tokens_out * 2) / 1e6
    assert f"cheap: 6 requests (429 ×0), {tokens_in} / {tokens_out} tokens, ${cost:.4f}" in printed
    assert "unpriced: 6 requests (429 ×0)" in printed and "cost unknown (no price" in printed
    page = tmp_path / "report.html"
    assert main(["report", *runs, "-o", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert '"api_usage": {"requests": 6' in html and "tokens in / out" in html


def test_a_judges_usage_is_reported_with_its_task_and_counted_in_the_run(tasks, tmp_path):
    yaml = (tasks / "limited_gen.yaml").read_text()
    (tasks / "limited_gen.yaml").write_text(
        yaml.replace("  - metric: exact_match", "  - metric: judge_correct")
    )
    with LimitedServer() as server:
        code = main(
            [
                "run", "--model", "dummy", "--tasks", "limited_gen", "--include-path", str(tasks),
                "--judge-model", "openai-chat",
                "--judge-model-args", f"model=j,base_url={server.base_url},price_in=1,price_out=1",
                "--output-dir", str(tmp_path / "out"), "--no-progress",
            ]
        )  # fmt: skip
        judged = server.requests
    assert code == 0 and judged == len(QUESTIONS)
    results = json.loads((tmp_path / "out" / "results.json").read_text())["assay"]
    judge = results["judges"]["limited_gen"][0]["requests"]["api"]
    assert judge["requests"] == judged and judge["cost_usd"] > 0
    assert "api" not in results["requests"]["limited_gen"]  # the dummy model sends nothing
    assert results["api_usage"]["requests"] == judged
    assert results["api_usage"]["cost_usd"] == pytest.approx(judge["cost_usd"])


def test_max_cost_holds_the_judges_the_run_builds(tasks, tmp_path, capsys):
    yaml = (tasks / "limited_gen.yaml").read_text()
    (tasks / "limited_gen.yaml").write_text(
        yaml.replace("  - metric: exact_match", "  - metric: judge_correct")
    )
    out = tmp_path / "out"
    # Prompt tokens at 0.01 USD each: a judge prompt costs a USD or two, so 5 USD pays for some.
    with LimitedServer() as server:
        code = main(
            [
                "run", "--model", "dummy", "--tasks", "limited_gen", "--include-path", str(tasks),
                "--judge-model", "openai-chat",
                "--judge-model-args", f"model=j,base_url={server.base_url},price_in=10000,price_out=0,num_concurrent=1",
                "--output-dir", str(out), "--no-progress", "--max-cost", "5",
            ]
        )  # fmt: skip
        judged = server.requests
    assert code == 2 and "--max-cost 5 USD reached" in capsys.readouterr().err
    assert 0 < judged < len(QUESTIONS)
    stopped = json.loads((out / "results.json").read_text())["assay"]
    assert stopped["stopped_by"] == "budget" and stopped["api_usage"]["requests"] == judged
    assert stopped["api_usage"]["cost_usd"] <= 5


def test_a_budget_stop_in_a_later_task_records_every_answer_paid_for(tasks, tmp_path):
    # Other prompts, so that the cache answers none of them; the answers stay 4 tokens.
    (tasks / "limited_gen2.yaml").write_text(generate_yaml("limited_gen2", "again: {{q}}"))
    out = tmp_path / "out"
    with LimitedServer() as server:
        code = main(
            [
                "run", "--model", "openai-chat",
                "--model-args", f"model=m,base_url={server.base_url},num_concurrent=1,"
                "price_in=0,price_out=100000",
                "--tasks", "limited_gen,limited_gen2", "--include-path", str(tasks),
                "--output-dir", str(out), "--no-progress", "--max-cost", "3.3",
            ]
        )  # fmt: skip
        answered = len(server.answered)
    assert code == 2
    # The first task's 6 answers (2.4 USD), then 2 of the second's at 0.4 before 3.3 is reached.
    assert answered == 8
    results = json.loads((out / "results.json").read_text())
    assert list(results["results"]) == ["limited_gen"]  # the task that finished
    assert results["assay"]["requests"]["limited_gen"]["api"]["requests"] == 6
    bill = results["assay"]["api_usage"]
    assert bill["requests"] == 8 and bill["cost_usd"] == pytest.approx(3.2)
    assert bill["stopped_by"] == "budget"
