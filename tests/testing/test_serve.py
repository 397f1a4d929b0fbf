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


def raw_post(url: str, data: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    """POST `data` as given (no JSON encoding); the status and the JSON error body."""
    request = urllib.request.Request(url, data, headers or {}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.parametrize(
    ("route", "data", "fragment"),
    [
        ("chat/completions", b"[1, 2]", "must be a JSON object"),
        ("chat/completions", b'"text"', "must be a JSON object"),
        ("chat/completions", b"\xff\xfe{", "not JSON"),
        ("chat/completions", b'{"messages": "hi"}', "'messages' must be"),
        ("chat/completions", b'{"messages": [1]}', "'messages' must be"),
        ("chat/completions", b'{"messages": [{"content": 5}]}', "'content' must be"),
        ("chat/completions", b'{"messages": [{"content": "a"}], "n": "x"}', "'n' is 'x'"),
        ("chat/completions", b'{"messages": [{"content": "a"}], "n": 0}', "'n' is 0"),
        ("chat/completions", b'{"messages": [{"content": "a"}], "n": 100000000}', "1 to 128"),
        ("completions", b'{"prompt": "a", "stop": [1]}', "'stop' must be"),
        ("completions", b'{"prompt": "a", "n": 2.5}', "'n' is 2.5"),
    ],
)
def test_malformed_requests_get_a_4xx_json_error(route, data, fragment):
    with StubServer() as server:
        status, body = raw_post(f"{server.base_url}/{route}", data)
        # The server still answers well-formed requests afterwards.
        ok, _, _ = post(f"{server.base_url}/completions", {"prompt": "1 + 1"})
    assert status == 400 and fragment in body["error"]["message"]
    assert ok == 200


def test_bad_or_oversized_content_lengths_are_refused_without_reading():
    import http.client

    with StubServer() as server:
        port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
        for length, status in (("abc", 400), ("-5", 400), (str(10**9), 413)):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.putrequest("POST", "/v1/completions")
            connection.putheader("Content-Length", length)
            connection.endheaders()
            response = connection.getresponse()
            assert response.status == status
            assert "error" in json.loads(response.read())
            connection.close()
