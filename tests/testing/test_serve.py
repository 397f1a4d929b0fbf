"""The local OpenAI-compatible stub server: canned answers, routes, rate limit, command line."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from assay.testing.serve import MODEL_ID, StubServer, canned_answer


def post(url: str, body: dict) -> tuple[int, dict, dict]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), dict(error.headers)


@pytest.mark.parametrize(
    ("prompt", "answer"),
    [
        ("Question: What is 17 + 25?\nAnswer:", "42"),
        ("What is 3 * 4? And 7 - 10?", "-3"),  # the last question counts
        ("12 x 3", "36"),
        ("7 / 2", "3"),
        ("7 / 0", "undefined"),
        ("Say hello.\nhello there\n\n", "hello there"),  # no arithmetic: the last line echoed
        ("", ""),
    ],
)
def test_canned_answers(prompt, answer):
    assert canned_answer(prompt) == answer


def test_the_routes_answer_as_an_openai_server():
    with StubServer() as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(f"{server.base_url}/models", timeout=10) as response:
            assert json.loads(response.read())["data"][0]["id"] == MODEL_ID
        status, chat, _ = post(
            f"{server.base_url}/chat/completions",
            {"model": "m", "messages": [{"role": "user", "content": "What is 2 + 2?"}], "n": 2},
        )
        assert status == 200
        assert [c["message"]["content"] for c in chat["choices"]] == ["4", "4"]
        status, completion, _ = post(
            f"{server.base_url}/completions",
            {"model": "m", "prompt": "a\nb stop c", "stop": [" stop"]},
        )
        assert status == 200 and completion["choices"][0]["text"] == "b"
        status, refused, _ = post(
            f"{server.base_url}/completions", {"prompt": "x", "echo": True, "logprobs": 1}
        )
        assert status == 400 and "scores no prompts" in refused["error"]["message"]
        assert post(f"{server.base_url}/embeddings", {})[0] == 404
        assert server.requests_served == 4  # every request but a 429


def test_requests_beyond_the_rate_limit_get_429_with_retry_after():
    with StubServer(rpm=2) as server:
        body = {"messages": [{"role": "user", "content": "1 + 1"}]}
        statuses = [post(f"{server.base_url}/chat/completions", body) for _ in range(3)]
    assert [s[0] for s in statuses] == [200, 200, 429]
    assert 0 < float(statuses[2][2]["Retry-After"]) <= 60


def test_the_api_backend_scores_the_example_task_through_the_stub(monkeypatch):
    from pathlib import Path

    import assay

    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    with StubServer() as server:
        results = assay.evaluate(
            "openai-chat",
            ["arithmetic"],
            include_path="examples/tasks",
            model_args={"model": MODEL_ID, "base_url": server.base_url},
        )
    assert results["results"]["arithmetic"]["exact_match,last-number"] == 1.0


def test_the_command_prints_its_base_url_and_refuses_a_bad_rpm():
    process = subprocess.Popen(
        [sys.executable, "-m", "assay.testing.serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert line.startswith("assay stub server: base_url=http://127.0.0.1:")
    refused = subprocess.run(
        [sys.executable, "-m", "assay.testing.serve", "--rpm", "0"], capture_output=True, text=True
    )
    assert refused.returncode == 2 and "--rpm 0" in refused.stderr
