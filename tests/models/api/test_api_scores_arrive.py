"""Log-likelihoods through `openai-completions` enter the response cache as they arrive (a
request once all its spans are answered), not when the executor's chunk of 512 completes: an
interrupt or kill loses only the requests in flight, as for generations."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fixtures.waiting import cached_when, wait_for

from assay.execution.local import run_requests
from assay.models.api.openai import OpenAICompletionsLM
from assay.requests.cache import ResponseCache, request_key
from assay.requests.types import (
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RollingRequest,
    RollingResult,
)


class EchoServer:
    """/v1/completions echoing made-up log-probabilities of a token-id prompt (each token's:
    -(id mod 7) / 10, the top one); after `hold_after` answers the rest wait for `release()`."""

    def __init__(self, hold_after: int | None = None) -> None:
        self.hold_after = hold_after
        self.answered = 0
        self.held = 0
        self._release = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    hold = server.hold_after is not None and server.answered >= server.hold_after
                    server.held += hold
                if hold:
                    server._release.wait(60)
                ids = body["prompt"]
                lps = [None] + [-(i % 7) / 10 for i in ids[1:]]
                tops = [None] + [{str(i): lp} for i, lp in zip(ids[1:], lps[1:], strict=True)]
                answer = {
                    "id": "c", "object": "text_completion", "created": 0, "model": "m",
                    "choices": [{"index": 0, "finish_reason": "length", "text": "",
                                 "logprobs": {"tokens": [str(i) for i in ids],
                                              "token_logprobs": lps, "top_logprobs": tops}}],
                }  # fmt: skip
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                with server._lock:
                    server.answered += 1

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def release(self) -> None:
        self.hold_after = None
        self._release.set()

    def __enter__(self) -> EchoServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self._httpd.shutdown()
        self._httpd.server_close()


def _lm(server, tiny_model_dir, **args):
    return OpenAICompletionsLM(
        model="m", base_url=server.base_url, tokenizer=str(tiny_model_dir), num_concurrent=1,
        **args,
    )  # fmt: skip


def _cached_while_held(server, lm, requests, tmp_path, answered):
    """Run `requests` in a thread; once the server holds a request after `answered` answers,
    what the response cache holds (read through a second connection); then the results."""
    cache_path = tmp_path / "cache.sqlite"
    cache = ResponseCache(cache_path, lm.identity())
    out: dict[str, Any] = {}
    worker = threading.Thread(
        target=lambda: out.update(answers=run_requests(lm, requests, cache=cache))
    )
    worker.start()
    wait_for(lambda: server.answered >= answered and server.held)
    assert server.answered == answered and server.held == 1
    # The answers enter the cache within Arrivals.window of arriving: wait for them (bounded).
    seen = cached_when(cache_path, lm.identity(), [request_key(r) for r in requests], answered)
    server.release()
    worker.join(60)
    return seen, out["answers"]


def test_loglikelihoods_enter_the_cache_while_the_chunk_runs(tiny_model_dir, tmp_path):
    requests = [LoglikelihoodRequest(f"question {i} is", f" answer {i}") for i in range(8)]
    with EchoServer(hold_after=5) as server:
        lm = _lm(server, tiny_model_dir)
        seen, answers = _cached_while_held(server, lm, requests, tmp_path, answered=5)
    assert len(seen) == 5
    results = dict(zip([request_key(r) for r in requests], list(answers), strict=True))
    for key, result in seen.items():
        assert isinstance(result, LoglikelihoodResult) and result == results[key]


def test_a_rolling_request_enters_the_cache_once_all_its_windows_are_answered(
    tiny_model_dir, tmp_path
):
    words = [f"word{i}" for i in range(30)]
    # The same words in another order: as many windows each, none shared.
    requests = [RollingRequest(" ".join(words)), RollingRequest(" ".join(words[::-1]))]
    with EchoServer() as server:
        whole = _lm(server, tiny_model_dir, max_length=8).loglikelihood_rolling(requests)
        windows = server.answered // 2
    assert windows >= 3 and server.answered == 2 * windows
    # Held with one window unanswered (whichever order the windows go in): one request whole.
    with EchoServer(hold_after=2 * windows - 1) as server:
        lm = _lm(server, tiny_model_dir, max_length=8)
        seen, answers = _cached_while_held(server, lm, requests, tmp_path, 2 * windows - 1)
    assert len(seen) == 1 and next(iter(seen.values())) in whole
    assert all(isinstance(r, RollingResult) for r in whole) and list(answers) == whole


def test_a_failed_loglikelihood_chunk_keeps_results_not_span_scores(tiny_model_dir, tmp_path):
    """The answers of a chunk that failed are kept as results of their request's kind."""
    requests = [LoglikelihoodRequest(f"q {i}", f" a {i}") for i in range(4)]
    with EchoServer(hold_after=2) as server:
        lm = _lm(server, tiny_model_dir, timeout=0.5, max_retries=0)
        cache = ResponseCache(tmp_path / "c.sqlite", lm.identity())
        with pytest.raises(Exception, match="request"):
            run_requests(lm, requests, cache=cache)
    kept = cache.get_many([request_key(r) for r in requests])
    assert len(kept) == 2
    assert all(isinstance(r, LoglikelihoodResult) for r in kept.values())
