"""What one OpenAI-compatible answer says about its generation, as a `Generation`.

One function, `read_choice`, shared by the online and the batch paths of `openai-chat` and
`openai-completions`, so that both read an answer the same way:

- thinking a server returns in a field of its own (`message.reasoning_content`, as vLLM,
  SGLang and DeepSeek send it, or `message.reasoning`) is kept apart from the answer (the
  message's `content`);
- thinking inline in the text (`<think>...</think>`) is split by the backend's
  `think_end_token` as `hf` splits it (`models.thinking`);
- hidden thinking (OpenAI's reasoning models report only `reasoning_tokens`) counts as
  thinking whose text is unknown;
- the finish reason is the choice's: `length` stays `length`; `stop` becomes `stop_sequence`
  when the server names the stop string that ended it (vLLM's `stop_reason`, SGLang's
  `matched_stop`) or when a stop string cuts the answer here, else stays `stop`;
- with `think_end_token` set, inline thinking is split whatever the usage says (a server may
  count reasoning tokens and still leave the thinking in the text);
- reasoning tokens come from `usage.completion_tokens_details.reasoning_tokens`, answer tokens
  from `usage.completion_tokens` less those; where the thinking took part of the tokens and
  the server does not count it, answer tokens are unknown (None); a generation that never
  closed its thinking has no answer tokens (0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from assay.models.base import cut_at_stops, stop_cut_reason
from assay.models.thinking import Thinking, split_thinking
from assay.requests.types import FinishReason, Generation

FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
}
"""OpenAI's finish_reason as a Generation's ("tool_calls": the model stopped to call tools);
the others (content_filter) have no counterpart and are left unknown (None)."""

REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Message fields servers return thinking in, in the order they are looked for."""


@dataclass(frozen=True, slots=True)
class AnswerReading:
    """How a backend reads its answers (from its model args)."""

    thinking: Thinking | None = None
    """Inline thinking markers; None: only a server's own reasoning field is thinking."""
    budget: int | None = None
    """Thinking tokens allowed: a generation whose reported reasoning tokens exceed it counts
    as unclosed."""


def read_choice(
    response: Any, until: Sequence[str], reading: AnswerReading, *, opened: bool = False
) -> Generation:
    """The first choice of a chat or completions answer as a `Generation`.

    `until`: the request's stop strings, applied to the answer here whatever the server did;
    `opened`: the prompt as sent left the model inside a thinking block.
    """
    choice = response.choices[0]
    message = getattr(choice, "message", None)
    text = (message.content if message is not None else choice.text) or ""
    finish = FINISH_REASONS.get(str(choice.finish_reason))
    # The SDK keeps fields outside its schema as attributes (vLLM's stop_reason).
    matched = getattr(choice, "stop_reason", None) or getattr(choice, "matched_stop", None)
    if finish == "stop" and isinstance(matched, str) and matched in until:
        finish = "stop_sequence"
    completion_tokens, reasoning_tokens = token_counts(getattr(response, "usage", None))
    reasoning = _reasoning_field(message)

    if reasoning is None and reading.thinking is not None:
        # Inline thinking, whatever the usage says: a server that counts reasoning tokens may
        # still leave the thinking in the text.
        inline = _split_inline(
            text, until, reading.thinking, opened, finish, completion_tokens, reasoning_tokens
        )
        if inline.thinking_closed is not None or not reasoning_tokens:
            return inline
        # No thinking in the text, yet the server counted some: it hid its thinking.
    if reasoning is not None or reasoning_tokens:
        # The server kept the thinking apart (or hid it): its answer field is the answer.
        answer = cut_at_stops(text, until)
        over_budget = (
            reading.budget is not None
            and reasoning_tokens is not None
            and reasoning_tokens > reading.budget
        )
        # Still thinking when it ended: no answer and cut by the token cap.
        closed = (bool(text) or finish != "length") and not over_budget
        answer_tokens = None
        if completion_tokens is not None and reasoning_tokens is not None:
            answer_tokens = max(completion_tokens - reasoning_tokens, 0)
        return Generation(
            answer,
            reasoning=reasoning,
            finish_reason=stop_cut_reason(finish, text, answer),
            thinking_closed=closed,
            reasoning_tokens=reasoning_tokens,
            # A thinking field without a reasoning count: the answer's share is unknown.
            answer_tokens=answer_tokens if closed else 0,
        )
    answer = cut_at_stops(text, until)
    return Generation(
        answer, finish_reason=stop_cut_reason(finish, text, answer), answer_tokens=completion_tokens
    )


def _split_inline(
    text: str,
    until: Sequence[str],
    thinking: Thinking,
    opened: bool,
    finish: FinishReason | None,
    completion_tokens: int | None,
    reasoning_tokens: int | None,
) -> Generation:
    """An answer whose thinking is inline, split at `thinking.end` as `hf` splits it; an
    answer that did not think (thinking_closed None) counts every token as the answer's."""
    answer_tokens = None  # without a reasoning count, the answer's share is unknown
    if completion_tokens is not None and reasoning_tokens is not None:
        answer_tokens = max(completion_tokens - reasoning_tokens, 0)
    generation = split_thinking(
        text,
        until,
        thinking,
        opened=opened,
        finish_reason=finish,
        reasoning_tokens=reasoning_tokens,
        answer_tokens=answer_tokens,
    )
    if generation.thinking_closed is None:  # it did not think: every token is the answer's
        return replace(generation, answer_tokens=completion_tokens)
    if generation.thinking_closed is False:
        return replace(generation, answer_tokens=0)
    return generation


def token_counts(usage: Any) -> tuple[int | None, int | None]:
    """(completion tokens, reasoning tokens) of an answer's `usage` (object or dict); None
    where the server does not say."""

    def get(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)

    if usage is None:
        return None, None
    details = get(usage, "completion_tokens_details")
    reasoning = get(details, "reasoning_tokens") if details is not None else None
    completion = get(usage, "completion_tokens")
    return (
        int(completion) if completion is not None else None,
        int(reasoning) if reasoning is not None else None,
    )


def _reasoning_field(message: Any) -> str | None:
    """The thinking a chat message carries in a field of its own; None without one."""
    if message is None:
        return None
    for name in REASONING_FIELDS:
        value = getattr(message, name, None)
        if isinstance(value, str) and value:
            return value
    return None


__all__ = ["FINISH_REASONS", "REASONING_FIELDS", "AnswerReading", "read_choice", "token_counts"]
