"""Tools in API requests and answers: OpenAI's and Anthropic's shapes of the provider-neutral
`requests.tools` values.

Pure functions over plain values, so the translation is tested without a server.

- OpenAI chat: `tools=[{"type": "function", "function": {...}}]`, `tool_choice` ("auto",
  "none", "required" or `{"type": "function", "function": {"name": ...}}`), assistant messages
  with `tool_calls` (arguments as the JSON text the model wrote) and `role: tool` messages
  answering a call by its `tool_call_id`.
- Anthropic Messages: `tools=[{"name", "description", "input_schema"}]`, `tool_choice`
  ({"type": "auto" | "any" | "none" | "tool"}), `tool_use` blocks in assistant turns and
  `tool_result` blocks in the user turn that follows (consecutive results share one turn, as
  Anthropic requires turns to alternate).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from assay.images import DocImage
from assay.models.api.anthropic_messages import content_blocks
from assay.models.api.payloads import image_messages
from assay.requests.tools import Conversation, ToolCall, ToolSpec, Turn, is_conversation
from assay.requests.types import Messages

_CHOICES = ("auto", "none", "required")


# -- OpenAI --------------------------------------------------------------------------------


def openai_tools(specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The `tools` field of a chat completions request."""
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
            },
        }
        for spec in specs
    ]


def openai_tool_choice(choice: str) -> str | dict[str, Any]:
    """The `tool_choice` field: a mode as is, any other value as the one function to call."""
    if choice in _CHOICES:
        return choice
    return {"type": "function", "function": {"name": choice}}


def openai_messages(
    prompt: str | Messages | Conversation,
    images: Sequence[DocImage],
    *,
    max_images: int | None = None,
    interleave: bool = True,
    detail: str | None = None,
) -> list[dict[str, Any]]:
    """Chat messages for any prompt: images laid out as `payloads.image_messages` lays them,
    then a conversation's tool calls and results in OpenAI's fields."""
    if not is_conversation(prompt):
        return image_messages(
            prompt,  # type: ignore[arg-type]
            images,
            max_images=max_images,
            interleave=interleave,
            detail=detail,
        )
    turns: Conversation = prompt  # type: ignore[assignment]
    plain = tuple((turn.role, turn.content) for turn in turns)
    laid_out = image_messages(
        plain, images, max_images=max_images, interleave=interleave, detail=detail
    )
    return [_openai_turn(turn, message) for turn, message in zip(turns, laid_out, strict=True)]


def _openai_turn(turn: Turn, message: dict[str, Any]) -> dict[str, Any]:
    if turn.role == "tool":
        return {"role": "tool", "tool_call_id": turn.tool_call_id, "content": message["content"]}
    if turn.role == "assistant" and turn.tool_calls:
        return {
            "role": "assistant",
            # OpenAI's own answers carry null content beside their calls.
            "content": message["content"] or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": sent_arguments(call)},
                }
                for call in turn.tool_calls
            ],
        }
    return message


def sent_arguments(call: ToolCall) -> str:
    """A call's arguments as sent back to a provider: the text the model wrote when there is
    one, else the parsed arguments as JSON."""
    if call.raw:
        return call.raw
    return call.arguments_json if call.arguments_json is not None else "{}"


def openai_calls(message: Any) -> tuple[ToolCall, ...]:
    """The tool calls of a chat answer's message (SDK object), in the order made; arguments
    that do not parse as a JSON object are kept as written, with no parsed arguments."""
    calls = getattr(message, "tool_calls", None) or []
    out: list[ToolCall] = []
    for call in calls:
        function = getattr(call, "function", None)
        if function is None:  # a custom (non-function) tool call: its input as written
            custom = getattr(call, "custom", None)
            name = str(getattr(custom, "name", ""))
            out.append(ToolCall(name, None, str(getattr(custom, "input", "")), call.id))
            continue
        arguments = function.arguments if isinstance(function.arguments, str) else ""
        out.append(ToolCall.parsed(function.name, arguments, id=call.id))
    return tuple(out)


# -- Anthropic -----------------------------------------------------------------------------


def anthropic_tools(specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The `tools` field of a Messages request."""
    return [
        {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}
        for spec in specs
    ]


def anthropic_tool_choice(choice: str) -> dict[str, Any]:
    """The `tool_choice` field: auto, none, required (Anthropic's "any"), or one tool."""
    if choice in _CHOICES:
        return {"type": {"required": "any"}.get(choice, choice)}
    return {"type": "tool", "name": choice}


def anthropic_turns(
    prompt: Conversation,
    images: Sequence[DocImage],
    *,
    max_images: int | None = None,
    interleave: bool = True,
) -> tuple[str | None, list[dict[str, Any]]]:
    """A conversation as Anthropic takes it: the system prompt apart, assistant calls as
    `tool_use` blocks, results as `tool_result` blocks of a user turn; consecutive turns of
    one role are merged into one turn of blocks."""
    plain = tuple((turn.role, turn.content) for turn in prompt)
    laid_out = image_messages(plain, images, max_images=max_images, interleave=interleave)
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for turn, message in zip(prompt, laid_out, strict=True):
        if turn.role == "system":
            system.append(turn.content)
            continue
        role = "user" if turn.role == "tool" else turn.role
        blocks = _blocks(content_blocks(message["content"]))
        if turn.role == "tool":
            blocks = [
                {"type": "tool_result", "tool_use_id": turn.tool_call_id, "content": turn.content}
            ]
        for call in turn.tool_calls:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": call.arguments or {},
                }
            )
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += blocks
        else:
            turns.append({"role": role, "content": blocks})
    return ("\n\n".join(system) if system else None), turns


def _blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return content


def anthropic_calls(message: Any) -> tuple[ToolCall, ...]:
    """The `tool_use` blocks of a Messages answer (SDK object), in order."""
    out: list[ToolCall] = []
    for block in getattr(message, "content", None) or []:
        if getattr(block, "type", None) == "tool_use":
            value = block.input
            raw = json.dumps(value, ensure_ascii=False)
            if isinstance(value, dict):
                out.append(ToolCall.parsed(block.name, value, raw=raw, id=block.id))
            else:
                out.append(ToolCall(block.name, None, raw, block.id))
    return tuple(out)


__all__ = [
    "anthropic_calls",
    "anthropic_tool_choice",
    "anthropic_tools",
    "anthropic_turns",
    "openai_calls",
    "openai_messages",
    "openai_tool_choice",
    "openai_tools",
    "sent_arguments",
]
