"""A sample's transcript: every model turn and tool call of an agent loop, in order.

Timings are the ones first measured: a turn's seconds are noted in the response cache with
its answer, so a resumed run writes the same transcript byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from assay.requests.tools import ToolCall, Turn
from assay.requests.types import Generation


@dataclass
class Transcript:
    """The turns of one sample's agent loop and how it ended."""

    turns: list[dict[str, Any]] = field(default_factory=list)
    """Records in order: the opening prompt, assistant turns, tool results, and in an
    episode (`agents.episode`) each later user turn."""
    stopped_by: str | None = None
    """"answer" (the model answered without calling a tool; in an episode, the conversation
    ended), or the limit reached: "max_turns", "max_tokens", "max_seconds", or one an
    episode enforces (BFCL: "max_steps")."""
    tokens: int = 0
    """Tokens the model generated over all turns (answer and thinking, where counted)."""
    seconds: float = 0.0
    """Model and tool time, as first measured."""
    end_state: dict[str, Any] = field(default_factory=dict)
    """The sample's state after the loop (what its tools changed)."""

    @property
    def model_turns(self) -> int:
        return sum(turn["role"] == "assistant" for turn in self.turns)

    @property
    def tool_calls(self) -> int:
        return sum(turn["role"] == "tool" for turn in self.turns)

    @property
    def tool_errors(self) -> int:
        return sum(turn["role"] == "tool" and turn["error"] for turn in self.turns)

    def calls(self) -> list[ToolCall]:
        """Every call the model made, in order."""
        return [
            call for group in self.answers_by_user_turn() for _, calls in group for call in calls
        ]

    def answers_by_user_turn(self) -> list[list[tuple[str, list[ToolCall]]]]:
        """Each model turn's text and calls, grouped by the user turn they answer (an
        episode's user turns; otherwise one group)."""
        groups: list[list[tuple[str, list[ToolCall]]]] = [[]]
        for turn in self.turns:
            if turn["role"] == "user" and not turn.get("results"):
                groups.append([])
            elif turn["role"] == "assistant":
                calls = [
                    ToolCall(c["name"], c["arguments_json"], c["raw"], c["id"])
                    for c in turn.get("_calls", [])
                ]
                groups[-1].append((turn["content"], calls))
        return groups

    def add_answer(self, answer: Generation, seconds: float) -> None:
        tokens = (answer.answer_tokens or 0) + (answer.reasoning_tokens or 0)
        self.tokens += tokens
        self.seconds += seconds
        record: dict[str, Any] = {
            "role": "assistant",
            "content": answer.text,
            "tool_calls": [call.as_dict() for call in answer.tool_calls],
            "finish_reason": answer.finish_reason,
            "answer_tokens": answer.answer_tokens,
            "reasoning_tokens": answer.reasoning_tokens,
            "seconds": round(seconds, 6),
        }
        if answer.reasoning is not None:
            record["reasoning"] = answer.reasoning
        record["_calls"] = [
            {"name": c.name, "arguments_json": c.arguments_json, "raw": c.raw, "id": c.id}
            for c in answer.tool_calls
        ]
        self.turns.append(record)

    def add_result(
        self, call: ToolCall, call_id: str, content: str, error: bool, seconds: float
    ) -> None:
        self.seconds += seconds
        self.turns.append(
            {
                "role": "tool",
                "tool_call_id": call_id,
                "name": call.name,
                "content": content,
                "error": error,
                "seconds": round(seconds, 6),
            }
        )

    def add_user(
        self, messages: tuple[Turn, ...], tools_added: tuple[str, ...] = (), results: bool = False
    ) -> None:
        """A user turn an episode opened (with the tools offered from it on, when new), or,
        with `results`, the message that carried the turn's tool results back (an episode
        whose model writes its calls in its text): not a new user turn."""
        record: dict[str, Any] = {
            "role": "user",
            "messages": [message.as_dict() for message in messages],
        }
        if tools_added:
            record["tools_added"] = list(tools_added)
        if results:
            record["results"] = True
        self.turns.append(record)

    def record(self) -> dict[str, Any]:
        """What the samples file keeps."""
        return {
            "stopped_by": self.stopped_by,
            "model_turns": self.model_turns,
            "tool_calls": self.tool_calls,
            "tool_errors": self.tool_errors,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 6),
            "end_state": self.end_state,
            "turns": [{k: v for k, v in t.items() if not k.startswith("_")} for t in self.turns],
        }


def replay_lines(transcript: dict[str, Any]) -> list[dict[str, Any]]:
    """Lines of a `--model replay` file that answer a sample's model turns as they were
    answered: one per assistant turn, its prompt the conversation before it (as {role,
    content} messages), with its text, calls, finish reason and token counts. `transcript` is the
    samples-file record's `transcript`; a run of the same task through `replay` on these
    lines asks the same conversations and gets the same answers, so it scores the same."""
    turns = transcript["turns"]
    messages = [_message(m) for m in turns[0]["messages"]]
    results: list[dict[str, Any]] = []  # sent as tool messages unless a message carries them
    lines: list[dict[str, Any]] = []
    for turn in turns[1:]:
        if turn["role"] == "tool":
            results.append({"role": "tool", "content": turn["content"]})
            continue
        if not turn.get("results"):
            messages.extend(results)
        results = []
        if turn["role"] == "assistant":
            calls = [
                {"name": c["name"], "arguments": c["raw"] or c["arguments"], "id": c["id"]}
                for c in turn["tool_calls"]
            ]
            line: dict[str, Any] = {"prompt": list(messages), "response": turn["content"]}
            if calls:
                line["tool_calls"] = calls
            for key in ("finish_reason", "answer_tokens", "reasoning_tokens"):
                if turn.get(key) is not None:
                    line[key] = turn[key]
            lines.append(line)
            messages.append({"role": "assistant", "content": turn["content"]})
        elif turn["role"] == "user":
            messages.extend(_message(m) for m in turn["messages"])
    return lines


def _message(message: dict[str, Any]) -> dict[str, Any]:
    return {"role": message["role"], "content": message["content"]}
