"""What goes into an Anthropic Messages request and what is read back out of the answer.

Pure functions over plain values, so the translation is tested without a server. Prompts
arrive as `payloads.image_messages` lays them out (OpenAI-shaped messages whose image parts
hold the doc's images); Anthropic takes the system prompt apart from the turns and images as
`image` blocks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from assay.errors import ModelError
from assay.models.api.payloads import image_url
from assay.models.api.usage import Usage
from assay.requests.types import Generation

FINISH_REASONS = {
    "end_turn": "stop",
    "max_tokens": "length",
    "stop_sequence": "stop_sequence",
    "tool_use": "tool_calls",
}
"""Anthropic's stop_reason as a Generation's finish_reason; other reasons (pause_turn,
refusal) have no counterpart and are left unknown (None)."""


def split_system(messages: Sequence[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """The system prompt (system messages joined by a blank line; None without any) and the
    other turns, whose content becomes Anthropic blocks (images base64-encoded)."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] == "system":
            if not isinstance(message["content"], str):
                raise ModelError(
                    "anthropic-chat: a system message holds an image; Anthropic's system prompt "
                    "takes text only, so put the <image> in a user turn."
                )
            system.append(message["content"])
        else:
            turns.append({"role": message["role"], "content": content_blocks(message["content"])})
    return ("\n\n".join(system) if system else None), turns


def content_blocks(content: str | Sequence[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A message's content as Anthropic takes it: plain text as is, parts as text and image
    blocks (empty text parts dropped: Anthropic refuses empty text blocks)."""
    if isinstance(content, str):
        return content
    blocks: list[dict[str, Any]] = []
    for part in content:
        if part["type"] == "text":
            if part["text"]:
                blocks.append({"type": "text", "text": part["text"]})
        else:
            blocks.append(image_block(image_url(part["image_url"]["url"])))
    return blocks


def image_block(url: str) -> dict[str, Any]:
    """An image block: a data: URL as base64 data, an http(s) URL as a url source."""
    if url.startswith("data:"):
        header, _, data = url.partition(",")
        media_type = header.removeprefix("data:").split(";", 1)[0] or "image/png"
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    return {"type": "image", "source": {"type": "url", "url": url}}


def stop_sequences(stops: Sequence[str], limit: int) -> list[str]:
    """The stop strings sent to Anthropic: at most `limit`, none of them whitespace only (the
    API refuses those). The backend cuts every stop string from the answer afterwards, so what
    is not sent changes the tokens paid for, never the answer."""
    return [stop for stop in stops if stop.strip()][:limit]


def anthropic_usage(usage: Any) -> Usage:
    """A Messages answer's `usage` (object or dict) as the meter counts it: every prompt token
    in `input_tokens` (Anthropic reports cache reads and writes apart from it), cache reads as
    cached. Thinking is part of `output_tokens`, which Anthropic does not split."""

    def get(name: str) -> Any:
        return usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)

    if usage is None or get("input_tokens") is None:
        return Usage(None, get("output_tokens") if usage is not None else None)
    read = get("cache_read_input_tokens") or 0
    written = get("cache_creation_input_tokens") or 0
    return Usage(
        input_tokens=int(get("input_tokens")) + read + written,
        output_tokens=get("output_tokens"),
        cached_input_tokens=read,
    )


def read_message(message: Any) -> Generation:
    """The answer in a Messages response: its text blocks joined, thinking kept apart.

    Thinking closed when the model went on to answer (any text block) or stopped for a reason
    other than max_tokens; a redacted thinking block counts as thinking whose text is hidden.
    """
    text: list[str] = []
    thoughts: list[str] = []
    for block in message.content or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            text.append(block.text)
        elif kind == "thinking":
            thoughts.append(block.thinking)
        elif kind == "redacted_thinking":
            thoughts.append("[redacted thinking]")
    stop_reason = getattr(message, "stop_reason", None)
    closed: bool | None = None
    if thoughts:
        closed = bool(text) or stop_reason != "max_tokens"
    usage = getattr(message, "usage", None)
    output_tokens = getattr(usage, "output_tokens", None)
    return Generation(
        text="".join(text),
        reasoning="\n\n".join(thoughts) if thoughts else None,
        finish_reason=FINISH_REASONS.get(str(stop_reason)),
        thinking_closed=closed,
        # Anthropic counts thinking and answer tokens together: only a thoughtless answer's
        # count is the answer's own.
        answer_tokens=output_tokens if not thoughts else None,
    )


__all__ = [
    "FINISH_REASONS",
    "anthropic_usage",
    "content_blocks",
    "image_block",
    "read_message",
    "split_system",
    "stop_sequences",
]
