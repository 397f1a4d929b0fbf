"""A loopback OpenAI-compatible server that plays a scripted model through BFCL's multi-turn
conversations, for benchmarks/bfcl_multi_turn.py, benchmarks/bfcl_throughput.py and the tests.

The model reads which entry it is in (the first user message), which user turn (user messages
so far) and which step of that turn (assistant messages since), and answers from the entry's
ground truth, bent by a variant chosen by the entry's position:

- right: the turn's ground-truth calls at once, then a text answer;
- one_by_one: the same calls one step at a time;
- wrong_value: turn 0's first call with its first argument changed;
- skip_turn: turn 1 answered with text only;
- malformed: turn 0's first call with arguments that are not JSON;
- hostile: turn 0 also calls Python's `len` and passes an argument name with a space;
- endless: turn 0 calls a tool at every step, never answering (BFCL's step limit ends it).

It serves /v1/chat/completions on 127.0.0.1 only, in a background thread; `hold` makes one
request wait (bounded) until released, so a test can kill a run mid-conversation.
"""

from __future__ import annotations

import ast
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

VARIANTS = (
    "right",
    "one_by_one",
    "wrong_value",
    "skip_turn",
    "malformed",
    "hostile",
    "endless",
)


def _calls_of(truth: list[str], params: dict[str, list[str]]) -> list[tuple[str, dict[str, Any]]]:
    """Ground-truth call texts (`cd(folder='x')`, `sort('a.txt')`) as (name, arguments),
    positional arguments named by the function's parameters in order."""
    out = []
    for text in truth:
        node = ast.parse(text, mode="eval").body
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        name = node.func.id
        arguments = dict(zip(params[name], (ast.literal_eval(a) for a in node.args)))
        arguments.update({k.arg: ast.literal_eval(k.value) for k in node.keywords})
        out.append((name, arguments))
    return out


RESULTS = "[{'role': 'tool'"
"""How bfcl-eval's prompting handler's results message begins (`repr` of tool messages)."""


def _written(calls: list[tuple[str, Any]]) -> str:
    """Calls as a prompting model writes them: `[f(a=1), g(b='x')]`; arguments that are not
    JSON (the malformed variant) as an unclosed call."""
    parts = []
    for name, arguments in calls:
        if isinstance(arguments, str):
            return f"[{name}(folder="
        parts.append(f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})")
    return "[" + ", ".join(parts) + "]"


def _bent(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 7
    if isinstance(value, str):
        return value + "_wrong"
    return [value]


class ScriptedBfcl:
    """The script for one category's entries (see the module); `ids` picks the entries in
    order, each entry's variant by its position among them."""

    def __init__(
        self,
        category: str,
        ids: list[str],
        variants: tuple[str, ...] = VARIANTS,
        mode: str = "fc",
    ):
        from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

        entries = {e["id"]: e for e in load_dataset_entry(category)}
        truths = {t["id"]: t["ground_truth"] for t in load_ground_truth_entry(category)}
        self.mode = mode
        """"fc": calls as tool calls; "prompt": calls written in the text, `[f(a=1), g()]`."""
        self.plans: dict[str, tuple[str, list[list[str]], dict[str, list[str]]]] = {}
        self.variant_of: dict[str, str] = {}
        for i, entry_id in enumerate(ids):
            entry = entries[entry_id]
            first = entry["question"][0][0]["content"]
            variant = variants[i % len(variants)]
            functions = entry["function"] + [
                f for held in entry.get("missed_function", {}).values() for f in held
            ]
            params = {f["name"]: list(f["parameters"].get("properties", {})) for f in functions}
            self.plans[first] = (variant, truths[entry_id], params)
            self.variant_of[entry_id] = variant
        self.requests = 0
        self.seen: list[str] = []
        """Every conversation asked (its messages as JSON), in arrival order."""
        self.hold_at: int | None = None
        self.held = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()

    def answer(self, body: dict[str, Any]) -> tuple[str, list[tuple[str, Any]]]:
        """(text, calls) for one request."""
        with self._lock:
            self.requests += 1
            number = self.requests
            self.seen.append(json.dumps(body["messages"], sort_keys=True))
        if self.hold_at is not None and number == self.hold_at:
            self.held.set()
            self.release.wait(timeout=60)
        messages = body["messages"]
        # In prompt mode the results come back as a user message: not a user turn.
        users = [
            i
            for i, m in enumerate(messages)
            if m.get("role") == "user" and not str(m.get("content")).startswith(RESULTS)
        ]
        plan = self.plans.get(messages[users[0]]["content"]) if users else None
        if plan is None:  # a conversation the script does not know: a text answer
            return "I cannot help with that.", []
        variant, truth, params = plan
        turn = len(users) - 1
        step = sum(m.get("role") == "assistant" for m in messages[users[-1] :])
        calls: list[tuple[str, Any]] = _calls_of(truth[turn], params) if turn < len(truth) else []
        if variant == "endless" and turn == 0:
            return "", [calls[0] if calls else ("pwd", {})]
        if variant == "one_by_one":
            return ("Done.", []) if step >= len(calls) else ("", [calls[step]])
        if step > 0 or not calls or (variant == "skip_turn" and turn == 1):
            return "Done.", []
        if turn == 0 and variant == "wrong_value" and calls[0][1]:
            name, arguments = calls[0]
            key = next(iter(arguments))
            calls[0] = (name, {**arguments, key: _bent(arguments[key])})
        if turn == 0 and variant == "malformed":
            calls[0] = (calls[0][0], '{"not json": ')
        if turn == 0 and variant == "hostile":
            odd = [] if self.mode == "prompt" else [(calls[0][0], {"folder name": "x"})]
            calls = [("len", {"obj": [1]}), *odd, *calls]
        return "", calls

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        text, calls = self.answer(body)
        if self.mode == "prompt" and calls:
            text, calls = _written(calls), []
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": arguments
                        if isinstance(arguments, str)
                        else json.dumps(arguments),
                    },
                }
                for i, (name, arguments) in enumerate(calls)
            ]
        return {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls" if calls else "stop",
                    "message": message,
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }


class Loopback:
    """`script` served on 127.0.0.1 (`port` 0: a free one) while the `with` block runs."""

    def __init__(self, script: ScriptedBfcl, port: int = 0) -> None:
        self.script = script
        handler = _handler(script)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> Loopback:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.script.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def _handler(script: ScriptedBfcl) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            self._send(200, script.completion(body))

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler
