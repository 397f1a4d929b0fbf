"""Tools in the model contract: what a request offers the model to call, and the calls it makes.

A request that offers tools is a `GenerateRequest` whose `tools` is not empty; its prompt is a
`Conversation` when earlier turns hold tool calls and their results. A backend that accepts
tools (`LM.accepts_tools`) answers with a `Generation` whose `tool_calls` lists what the model
asked for, in the order it asked. Every value here is frozen and hashable, so requests that offer
the same tools deduplicate and cache like any other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from assay.errors import ModelError
from assay.requests.types import Messages, canonical_json


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One function the model may call: its name, what it does, and its parameters as a JSON
    Schema object (kept as canonical JSON text, so the spec hashes)."""

    name: str
    description: str = ""
    parameters_json: str = '{"properties": {}, "type": "object"}'

    @classmethod
    def of(
        cls, name: str, description: str = "", parameters: dict[str, Any] | None = None
    ) -> ToolSpec:
        """A spec from a parameters schema given as a dict."""
        schema = parameters if parameters is not None else {"type": "object", "properties": {}}
        return cls(name=name, description=description, parameters_json=canonical_json(schema))

    @property
    def parameters(self) -> dict[str, Any]:
        """The parameters' JSON Schema."""
        schema: dict[str, Any] = json.loads(self.parameters_json)
        return schema

    def as_dict(self) -> dict[str, Any]:
        """Provider-neutral form, as samples files and cache keys write it."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model made: the function's name and its arguments.

    `arguments_json` is the arguments as canonical JSON when they parsed as a JSON object, and
    None when they did not: an unparseable call is recorded as such (with `raw`), never guessed.
    """

    name: str
    arguments_json: str | None
    raw: str = ""
    """The call as the model wrote it (the provider's arguments string, or the text a local
    model generated for this call)."""
    id: str | None = None
    """The provider's call id, which the tool result's turn refers back to."""

    @classmethod
    def parsed(
        cls,
        name: str,
        raw_arguments: str | dict[str, Any],
        *,
        raw: str | None = None,
        id: str | None = None,
    ) -> ToolCall:
        """A call whose arguments are parsed from `raw_arguments` (JSON text or a dict); a text
        that is not a JSON object leaves `arguments_json` None."""
        if isinstance(raw_arguments, dict):
            text = raw if raw is not None else json.dumps(raw_arguments)
            return cls(name, canonical_json(raw_arguments), text, id)
        try:
            value = json.loads(raw_arguments) if raw_arguments.strip() else {}
        except (ValueError, RecursionError):  # nested past the parser's depth: unparseable too
            value = None
        arguments = canonical_json(value) if isinstance(value, dict) else None
        return cls(name, arguments, raw if raw is not None else raw_arguments, id)

    @property
    def arguments(self) -> dict[str, Any] | None:
        """The arguments as a dict, or None when the model's text did not parse."""
        if self.arguments_json is None:
            return None
        value: dict[str, Any] = json.loads(self.arguments_json)
        return value

    def as_dict(self) -> dict[str, Any]:
        """What samples files and the response cache write."""
        return {"id": self.id, "name": self.name, "arguments": self.arguments, "raw": self.raw}


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a conversation that may hold tool calls and tool results.

    role "system", "user", "assistant" (with `tool_calls` when it called tools) or "tool" (a
    result: `content` answers the call `tool_call_id` made to `name`).
    """

    role: str
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """Provider-neutral form, as samples files and cache keys write it."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [call.as_dict() for call in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out


Conversation = tuple[Turn, ...]
"""A chat whose turns may carry tool calls and results (see `Turn`)."""


def is_conversation(prompt: object) -> bool:
    """Whether a request's prompt is a `Conversation` (turns that may carry tool calls and
    results) rather than a plain string or (role, content) messages."""
    return isinstance(prompt, tuple) and bool(prompt) and isinstance(prompt[0], Turn)


def conversation_of(prompt: str | Messages | Conversation) -> Conversation:
    """Any prompt as a `Conversation`: a string is one user turn, messages become turns."""
    if isinstance(prompt, str):
        return (Turn("user", prompt),)
    if is_conversation(prompt):
        return prompt  # type: ignore[return-value]
    return tuple(Turn(role, content) for role, content in prompt)  # type: ignore[misc]


def plain_prompt(prompt: str | Messages | Conversation, backend: str) -> str | Messages:
    """`prompt` for a backend that takes no tool calls; a `Conversation` is refused, naming
    the backends that take one."""
    if is_conversation(prompt):
        raise ModelError(
            f"--model {backend} does not take tool calls or tool results: a conversation with "
            "tools needs a backend that accepts tools (openai-chat, anthropic-chat, hf, vllm)."
        )
    return prompt  # type: ignore[return-value]


def conversation_record(prompt: str | Messages | Conversation) -> Any:
    """A prompt as samples files and cache keys write it: a string as is, messages as
    {role, content} dicts, a conversation's turns by `Turn.as_dict`."""
    if isinstance(prompt, str):
        return prompt
    if is_conversation(prompt):
        return [turn.as_dict() for turn in prompt]  # type: ignore[union-attr]
    return [{"role": role, "content": content} for role, content in prompt]  # type: ignore[misc]


def template_messages(conversation: Conversation) -> list[dict[str, Any]]:
    """A conversation as transformers chat templates take it: assistant calls as
    `tool_calls` ({type, id, function: {name, arguments as a dict}}), results as `role: tool`
    messages with their call id and tool name."""
    out: list[dict[str, Any]] = []
    for turn in conversation:
        message: dict[str, Any] = {"role": turn.role, "content": turn.content}
        if turn.tool_calls:
            message["tool_calls"] = [
                {
                    "type": "function",
                    "id": call.id,
                    "function": {"name": call.name, "arguments": call.arguments or {}},
                }
                for call in turn.tool_calls
            ]
        if turn.role == "tool":
            message["tool_call_id"] = turn.tool_call_id
            message["name"] = turn.name
        out.append(message)
    return out


def call_from_dict(record: dict[str, Any]) -> ToolCall:
    """A `ToolCall` from its `as_dict` record (samples files, transcripts)."""
    arguments = record.get("arguments")
    return ToolCall(
        name=str(record["name"]),
        arguments_json=canonical_json(arguments) if isinstance(arguments, dict) else None,
        raw=str(record.get("raw") or ""),
        id=record.get("id"),
    )
