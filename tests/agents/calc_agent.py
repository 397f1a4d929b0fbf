"""A tiny agent task for tests: a calculator with two tools and a loopback model that plays a
scripted conversation ((a + b) * c by calls to add and multiply, then the answer)."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

TOOLS = '''
def add(a: int, b: int, state: dict) -> int:
    """Add two whole numbers."""
    state["calls"] = state.get("calls", 0) + 1
    return a + b


def multiply(a: int, b: int, state: dict) -> int:
    """Multiply two whole numbers."""
    state["calls"] = state.get("calls", 0) + 1
    return a * b
'''

TASK = """task: calc_agent
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "Compute ({{{{a}}}} + {{{{b}}}}) * {{{{c}}}} with the tools."
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  max_gen_toks: 64
metric_list:
  - metric: exact_match
  - metric: tool_call_match
  - metric: end_state
metadata:
  agent:
    max_turns: {max_turns}
    state_field: state
    tools:
      - function: !function calc_tools.add
      - function: !function calc_tools.multiply
"""


def write_task(folder: Path, n_docs: int = 4, max_turns: int = 5) -> Path:
    """The task, its data (n_docs rows) and its tools module in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n_docs):
        a, b, c = i + 1, i + 2, 3
        rows.append(
            {
                "a": a, "b": b, "c": c, "answer": str((a + b) * c),
                "expected_calls": [
                    {"name": "add", "arguments": {"a": a, "b": b}},
                    {"name": "multiply", "arguments": {"a": a + b, "b": c}},
                ],
                "state": {"calls": 0},
                "expected_state": {"calls": 2},
            }
        )  # fmt: skip
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (folder / "calc_tools.py").write_text(TOOLS, encoding="utf-8")
    path = folder / "calc_agent.yaml"
    path.write_text(TASK.format(data=data, max_turns=max_turns), encoding="utf-8")
    return path


class ScriptedCalculator:
    """The loopback model's script: add, then multiply, then the number; `hold` makes the
    answer to one doc's second turn wait (bounded) until `release` is set, after writing
    `held_marker`, so a test can kill the run mid-conversation."""

    def __init__(self, hold_doc_a: int | None = None, held_marker: Path | None = None) -> None:
        self.hold_doc_a, self.held_marker = hold_doc_a, held_marker
        self.release = threading.Event()
        self.seen: list[str] = []
        """A key of every conversation asked, in arrival order."""
        self._lock = threading.Lock()

    def _turn(self, body: dict[str, Any]) -> tuple[int, int, int, list[str]]:
        messages = body["messages"]
        a, b, c = (int(x) for x in re.findall(r"\d+", messages[0]["content"])[:3])
        results = [str(m["content"]) for m in messages if m.get("role") == "tool"]
        return a, b, c, results

    def calls(self, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]] | None:
        a, b, c, results = self._turn(body)
        with self._lock:
            self.seen.append(json.dumps(body["messages"], sort_keys=True))
        if len(results) == 1 and a == self.hold_doc_a and not self.release.is_set():
            if self.held_marker is not None:
                self.held_marker.write_text("held", encoding="utf-8")
            self.release.wait(timeout=60)
        if not results:
            return [("add", {"a": a, "b": b})]
        if len(results) == 1:
            return [("multiply", {"a": int(results[0]), "b": c})]
        return None

    def reply(self, body: dict[str, Any]) -> tuple[str, str | None]:
        _, _, _, results = self._turn(body)
        return (results[-1] if len(results) >= 2 else ""), None
