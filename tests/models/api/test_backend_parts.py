"""The API backend's parts as users meet them: a spending limit each backend is built with
(never a process-wide one), answers the SDK cannot read still counted as paid, and `close`
ending the clients' event-loop thread (the run closes the backends it built)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fixtures.json_tasks import generate_yaml, write_task
from fixtures.limited_server import LimitedServer
from fixtures.provider_fakes import FakeProviders

import assay
from assay.errors import ConfigError
from assay.models.api.anthropic_chat import AnthropicChatLM
from assay.models.api.budget import CostLimitReached, SpendingLimit
from assay.models.api.openai import OpenAIChatLM
from assay.models.api.runner import APIRequestError
from assay.requests.types import GenerateRequest, GenParams

REQUESTS = [
    GenerateRequest(f"please answer question number {i}", GenParams(until=(), max_gen_toks=8))
    for i in range(6)
]
PRICES = {"price_in": 0, "price_out": 100_000}
"""Prompts free, 0.1 USD per output token: LimitedServer's 4-token answers cost 0.4 each, and
a request before any answer is estimated at its 8 new tokens (0.8)."""


def _answered_under(limit: SpendingLimit, server: LimitedServer) -> tuple[int, OpenAIChatLM]:
    lm = OpenAIChatLM(
        spending=limit, model="m", base_url=server.base_url, num_concurrent=1, **PRICES
    )
    with pytest.raises(CostLimitReached) as stopped:
        lm.generate_until(REQUESTS)
    assert sum(a is not None for a in stopped.value.partial) == lm.usage_stats()["requests"]
    return int(lm.usage_stats()["requests"] or 0), lm


def test_two_backends_in_one_process_each_keep_their_own_limit():
    small, large = SpendingLimit(1.3), SpendingLimit(2.1)
    with LimitedServer() as server:
        # Interleaved on purpose: a limit shared through the process would mix their spending.
        small_answered, small_lm = _answered_under(small, server)
        large_answered, large_lm = _answered_under(large, server)
        free = OpenAIChatLM(model="m", base_url=server.base_url, num_concurrent=1, **PRICES)
        assert len(free.generate_until(REQUESTS)) == len(REQUESTS)  # no limit: all sent
    # 0.8 estimated before any answer, then 0.4 per answer: 3 fit in 1.3 and 5 in 2.1.
    assert (small_answered, large_answered) == (3, 5)
    assert small.spent == pytest.approx(1.2) and large.spent == pytest.approx(2.0)
    assert small.reached and large.reached
    assert free.usage_stats()["requests"] == len(REQUESTS)
    for lm in (small_lm, large_lm, free):
        lm.close()


def test_a_limit_is_refused_for_a_model_without_prices_when_the_backend_is_built():
    with pytest.raises(ConfigError, match="--max-cost needs the prices"):
        OpenAIChatLM(spending=SpendingLimit(1), model="m", base_url="http://127.0.0.1:9/v1")


def test_spending_is_not_a_model_arg():
    with pytest.raises(ConfigError, match=r"spending='5' is not a model arg.*--max-cost"):
        OpenAIChatLM(spending="5", model="m", base_url="http://127.0.0.1:9/v1")


def test_max_cost_with_a_model_object_that_spends_says_how_to_limit_it():
    lm = OpenAIChatLM(model="m", base_url="http://127.0.0.1:9/v1", **PRICES)
    with pytest.raises(ConfigError, match=r"spending=SpendingLimit\(2\.5\)"):
        assay.evaluate(model=lm, tasks=["arc_easy"], max_cost=2.5)


class _OneBody:
    """A loopback server whose every POST is answered 200 with `body` as `content_type`."""

    def __init__(self, body: bytes, content_type: str = "application/json") -> None:
        body_, ctype = body, content_type

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body_)))
                self.end_headers()
                self.wfile.write(body_)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> _OneBody:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(60)


UNREADABLE = {
    "broken JSON": (b'{"usage": {"prompt_tokens": 3, "completion_tokens": 2', "application/json"),
    "not JSON": (b"hello there", "text/plain"),
    "wrong shape": (
        json.dumps(
            {"usage": {"prompt_tokens": 3, "completion_tokens": 2}, "choices": "x"}
        ).encode(),
        "application/json",
    ),
}


@pytest.mark.parametrize("kind", list(UNREADABLE))
def test_a_200_the_sdk_cannot_read_fails_the_request_and_still_counts_as_paid(kind):
    body, content_type = UNREADABLE[kind]
    with _OneBody(body, content_type) as server:
        lm = OpenAIChatLM(
            model="m", base_url=server.base_url, max_retries=3, price_in=1, price_out=1
        )
        with pytest.raises(APIRequestError) as failed:
            lm.generate_until(REQUESTS[:1])
        lm.close()
    assert "request 0: the server's answer" in str(failed.value)
    stats = lm.usage_stats()
    assert stats["requests"] == 1 and stats["retries"] == 0  # paid once, never repeated
    if kind == "wrong shape":  # its usage was readable: counted and priced
        assert (stats["input_tokens"], stats["output_tokens"]) == (3, 2)
    else:
        assert stats["requests_without_usage"] == 1 and stats["cost_usd"] is None


def test_anthropic_answers_that_cannot_be_read_count_as_paid_too():
    body, content_type = UNREADABLE["broken JSON"]
    with _OneBody(body, content_type) as server:
        lm = AnthropicChatLM(model="m", base_url=server.base_url.removesuffix("/v1"))
        with pytest.raises(APIRequestError, match="could not be parsed"):
            lm.generate_until(REQUESTS[:1])
        lm.close()
    stats = lm.usage_stats()
    assert stats["requests"] == 1 and stats["requests_without_usage"] == 1


def test_under_a_limit_an_unreadable_answer_makes_the_cost_unknown_and_stops():
    body, content_type = UNREADABLE["broken JSON"]
    limit = SpendingLimit(100)
    with _OneBody(body, content_type) as server:
        lm = OpenAIChatLM(spending=limit, model="m", base_url=server.base_url, num_concurrent=1,
                          price_in=1, price_out=1)  # fmt: skip
        with pytest.raises(CostLimitReached, match="cannot be kept: an answer could not be read"):
            lm.generate_until(REQUESTS)
        lm.close()
    assert lm.usage_stats()["requests"] == 1  # nothing sent after it
    assert limit.unknown and limit.reached


def _loop_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "assay-api-calls" and t.is_alive()]


@pytest.mark.parametrize("backend", [OpenAIChatLM, AnthropicChatLM])
def test_close_ends_the_event_loop_thread_and_the_backend_still_works_after(backend):
    with FakeProviders() as fake:
        url = fake.openai_url if backend is OpenAIChatLM else fake.anthropic_url
        lm = backend(model="m", base_url=url)
        before = set(_loop_threads())
        lm.generate_until(REQUESTS[:2])
        (thread,) = set(_loop_threads()) - before
        lm.close()
        assert not thread.is_alive()  # close waits for it
        assert len(lm.generate_until(REQUESTS[:1])) == 1  # a new loop for a later request
        lm.close()
    assert set(_loop_threads()) <= before


def test_a_run_closes_the_backends_it_built(tmp_path):
    rows = [{"q": f"item {i}", "a": f"answer: item {i}"} for i in range(3)]
    tasks = write_task(tmp_path / "tasks", generate_yaml("tiny_gen"), rows)
    before = set(_loop_threads())
    with FakeProviders() as fake:
        results = assay.evaluate(
            model="openai-chat",
            model_args={"model": "m", "base_url": fake.openai_url},
            tasks=["tiny_gen"],
            include_path=str(tasks),
            show_progress=False,
        )
    assert results["results"]["tiny_gen"]
    assert set(_loop_threads()) <= before
