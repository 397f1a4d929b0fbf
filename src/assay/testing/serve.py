"""A local OpenAI-compatible stub server with deterministic canned answers.

    python -m assay.testing.serve [--port 8000] [--rpm N]

It lets a user try `--model openai-chat` / `openai-completions` (and `run_evals` API configs)
without a key, a model or the network, and lets tests drive the API backends end to end. It
listens on 127.0.0.1 only and prints the base URL to give as `base_url=`.

Routes: `GET /v1/models`, `POST /v1/completions`, `POST /v1/chat/completions`. Every answer is
`canned_answer(prompt)`: the result of the last arithmetic question in the prompt ("What is
17 + 25?" gives "42"), else the prompt's last line echoed back. Generation settings (`stop`,
`max_tokens`, `temperature`, `seed`, `n`) are accepted; `n` copies of the answer are returned
(at most 128). A malformed request (a body that is not a JSON object, `messages` that are not
a list of messages, a bad `n` or `stop`) is answered 400 with an OpenAI-style JSON error.
A completions request asking for prompt log-probabilities (`echo` with `logprobs`) is answered
400: the stub scores nothing, so loglikelihood tasks need a real server.

`--rpm N` answers 429 with a `Retry-After` header to requests beyond N in any 60-second window,
as rate-limited services do. Every answer's `usage` counts words as tokens (the prompt's, and
the answers'), so token and cost accounting can be tried too.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["StubServer", "canned_answer", "main"]

MODEL_ID = "assay-stub"
_ARITHMETIC = re.compile(r"(-?\d+)\s*([-+*x×/])\s*(-?\d+)")


def canned_answer(prompt: str) -> str:
    """The stub's answer to `prompt`: the last arithmetic question's result, else its last line.

    Division is integer division (a canned answer stays a whole number); a division by zero is
    answered "undefined".
    """
    found = _ARITHMETIC.findall(prompt)
    if not found:
        lines = [line for line in prompt.strip().splitlines() if line.strip()]
        return lines[-1].strip() if lines else ""
    left, op, right = found[-1]
    a, b = int(left), int(right)
    if op == "+":
        return str(a + b)
    if op == "-":
        return str(a - b)
    if op in "*x×":
        return str(a * b)
    return str(a // b) if b else "undefined"


MAX_CHOICES = 128
"""The most choices (`n`) one request may ask for."""
MAX_BODY_BYTES = 8 * 1024 * 1024
"""The largest request body read."""


class _Refused(Exception):
    """A request the stub answers with an error status (4xx) and this message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _messages(value: Any) -> list[dict[str, Any]]:
    """A chat request's `messages`: a non-empty list of objects."""
    if not isinstance(value, list) or not value or not all(isinstance(m, dict) for m in value):
        raise _Refused(400, "'messages' must be a non-empty list of message objects")
    return value


def _message_text(message: dict[str, Any]) -> str:
    """A chat message's text (content parts other than text, such as images, are skipped)."""
    content = message.get("content") or ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _Refused(400, "a message's 'content' must be a string or a list of parts")
    texts = [part.get("text") for part in content if isinstance(part, dict)]
    return "".join(text for text in texts if isinstance(text, str))


def _choices_wanted(value: Any) -> int:
    """A request's `n`: a whole number from 1 to MAX_CHOICES (absent or null: 1)."""
    if value is None:
        return 1
    if type(value) is not int or not 1 <= value <= MAX_CHOICES:
        raise _Refused(400, f"'n' is {value!r}; give a whole number from 1 to {MAX_CHOICES}")
    return value


def _stop_strings(value: Any) -> list[str]:
    """A request's `stop`: a string, a list of strings, or absent."""
    stops = [value] if isinstance(value, str) else value if value is not None else []
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise _Refused(400, "'stop' must be a string or a list of strings")
    return stops


def _cut(text: str, stop: list[str]) -> str:
    """`text` before the first of the request's stop strings, as a server applies them."""
    for s in stop:
        if s:
            text = text.split(s, 1)[0]
    return text


class _RateWindow:
    """Requests accepted in the last 60 seconds, for `--rpm`."""

    def __init__(self, rpm: int | None) -> None:
        self.rpm = rpm
        self._times: deque[float] = deque()
        self._lock = threading.Lock()

    def retry_after(self) -> float:
        """0 when a request may go now (and counts it), else the seconds until one may."""
        if self.rpm is None:
            return 0.0
        now = time.monotonic()
        with self._lock:
            while self._times and now - self._times[0] >= 60.0:
                self._times.popleft()
            if len(self._times) < self.rpm:
                self._times.append(now)
                return 0.0
            return 60.0 - (now - self._times[0])


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a request log on stderr would drown the user's own output."""

    def do_GET(self) -> None:
        if self.path.rstrip("/").split("?")[0] == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]})
        else:
            self._error(404, f"no route GET {self.path}; try /v1/models")

    def do_POST(self) -> None:
        try:
            self._post()
        except _Refused as refused:
            self._error(refused.status, str(refused))
        except Exception as exc:  # a request the checks missed: still an answer, never a hang
            self._error(500, f"the stub server could not answer: {type(exc).__name__}: {exc}")

    def _post(self) -> None:
        route = self.path.rstrip("/").split("?")[0]
        body = self._body()
        wait = self.server.rate.retry_after()
        if wait:
            self._error(429, "rate limit reached (--rpm)", {"Retry-After": f"{wait:.2f}"})
            return
        self.server.requests_served += 1
        if route not in ("/v1/chat/completions", "/v1/completions"):
            raise _Refused(
                404,
                f"no route POST {self.path}; the stub serves /v1/completions and /v1/chat/completions",
            )
        n = _choices_wanted(body.get("n"))
        stop = _stop_strings(body.get("stop"))
        if route == "/v1/chat/completions":
            prompt = "\n".join(_message_text(m) for m in _messages(body.get("messages")))
            answer = _cut(canned_answer(prompt), stop)
            choices = [
                {
                    "index": i,
                    "message": {"role": "assistant", "content": answer},
                    "finish_reason": "stop",
                }
                for i in range(n)
            ]
            self._send(200, self._completion("chat.completion", body, choices, prompt, answer))
            return
        if body.get("echo") and body.get("logprobs") is not None:
            raise _Refused(
                400,
                "the assay stub server scores no prompts (echo with logprobs): loglikelihood "
                "tasks need a real completions server such as vllm serve",
            )
        given = body.get("prompt")
        first = given[0] if isinstance(given, list) and given else given
        text = first if isinstance(first, str) else ""
        answer = _cut(canned_answer(text), stop)
        choices = [
            {"index": i, "text": answer, "finish_reason": "stop", "logprobs": None}
            for i in range(n)
        ]
        self._send(200, self._completion("text_completion", body, choices, text, answer))

    def _body(self) -> dict[str, Any]:
        """The request's JSON object, read within MAX_BODY_BYTES; refused (4xx) otherwise."""
        given = self.headers.get("Content-Length")
        try:
            length = int(given or 0)
        except ValueError:
            raise _Refused(400, f"Content-Length {given!r} is not a number of bytes") from None
        if length < 0:
            raise _Refused(400, f"Content-Length {length} is negative")
        if length > MAX_BODY_BYTES:
            raise _Refused(413, f"request body of {length} bytes; the stub takes {MAX_BODY_BYTES}")
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError alike
            raise _Refused(400, f"request body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise _Refused(400, f"request body must be a JSON object, not {type(body).__name__}")
        return body

    def _completion(
        self,
        kind: str,
        body: dict[str, Any],
        choices: list[dict[str, Any]],
        prompt: str,
        answer: str,
    ) -> dict[str, Any]:
        # Words stand for tokens, so that usage and cost accounting have something to count.
        used, made = len(prompt.split()), len(answer.split()) * len(choices)
        return {
            "id": f"stub-{self.server.requests_served}",
            "object": kind,
            "created": int(time.time()),
            "model": str(body.get("model") or MODEL_ID),
            "choices": choices,
            "usage": {
                "prompt_tokens": used,
                "completion_tokens": made,
                "total_tokens": used + made,
            },
        }

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._send(
            status, {"error": {"message": message, "type": "stub_error", "code": status}}, headers
        )

    def _send(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default 5 resets a burst of concurrent connections

    def __init__(self, port: int, rpm: int | None) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.rate = _RateWindow(rpm)
        self.requests_served = 0


class StubServer:
    """The stub server on 127.0.0.1, in a background thread: ``with StubServer() as server:``
    then ``base_url=server.base_url``. Port 0 (the default) takes a free port."""

    def __init__(self, port: int = 0, rpm: int | None = None) -> None:
        self._server = _HTTPServer(port, rpm)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """The URL to give the API backends as `base_url=` (ends in /v1)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def requests_served(self) -> int:
        """Requests answered so far (429 refusals excluded)."""
        return self._server.requests_served

    def __enter__(self) -> StubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def main(argv: list[str] | None = None) -> int:
    """`python -m assay.testing.serve`: serve until interrupted."""
    parser = argparse.ArgumentParser(
        prog="python -m assay.testing.serve",
        description="A local OpenAI-compatible stub server with canned answers (127.0.0.1 only).",
    )
    parser.add_argument(
        "--port", type=int, default=8000, help="port to listen on (0: any free port)"
    )
    parser.add_argument(
        "--rpm", type=int, default=None, help="answer 429 beyond this many requests per minute"
    )
    args = parser.parse_args(argv)
    if args.rpm is not None and args.rpm < 1:
        parser.error(f"--rpm {args.rpm}: give a whole number of requests per minute, 1 or more")
    try:
        server = _HTTPServer(args.port, args.rpm)
    except OSError as exc:
        parser.error(
            f"--port {args.port}: cannot listen on 127.0.0.1:{args.port} ({exc.strerror}); "
            "choose another port, or --port 0 for a free one"
        )
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    print(f"assay stub server: base_url={url} (model {MODEL_ID}; Ctrl-C stops it)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
