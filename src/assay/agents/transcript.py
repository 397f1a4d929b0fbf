"""A sample's transcript: every model turn and tool call of an agent loop, in order.

Timings are the ones first measured: a turn's seconds are noted in the response cache with
its answer, so a resumed run writes the same transcript byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from assay.requests.tools import ToolCall
from assay.requests.types import Generation


@dataclass
class Transcript:
    """The turns of one sample's agent loop and how it ended."""

    turns: list[dict[str, Any]] = field(default_factory=list)
    """Records in order: the opening prompt, assistant turns, tool results."""
    stopped_by: str | None = None
    """"answer" (the model answered without calling a tool), or the limit reached:
    "max_turns", "max_tokens" or "max_seconds"."""
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
            ToolCall(c["name"], c["arguments_json"], c["raw"], c["id"])
            for turn in self.turns
            if turn["role"] == "assistant"
            for c in turn.get("_calls", [])
        ]

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
