"""What goes into an OpenAI-compatible request and what is read back out of the answer.

Pure functions over plain values, so the translation is tested without a server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from assay.models._decoding import decoding_of
from assay.models.api.runner import PermanentFailure
from assay.models.spans import ScoredSpan
from assay.prompts import chat
from assay.requests.types import GenerateRequest, Messages

CHARS_PER_TOKEN = 4
"""Rough size of a token in characters, for rate limits when no tokenizer is given."""


def as_messages(prompt: str | Messages) -> list[dict[str, str]]:
    """Chat messages for an API; a plain string becomes one user message."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return chat.as_messages(prompt)


def sampling_fields(
    request: GenerateRequest, default_seed: int | None, max_stop_sequences: int
) -> dict[str, Any]:
    """Temperature, top_p, seed and stop fields of one generation request (see `decoding_of`).

    Only the first `max_stop_sequences` stop strings go to the server (OpenAI accepts four); the
    backend applies all of them to the answer afterwards.
    """
    decoding = decoding_of(request, default_seed)
    fields: dict[str, Any] = {"temperature": decoding.temperature}
    if decoding.top_p is not None:
        fields["top_p"] = decoding.top_p
    if decoding.seed is not None:
        fields["seed"] = decoding.seed
    if decoding.stops[:max_stop_sequences]:
        fields["stop"] = list(decoding.stops[:max_stop_sequences])
    return fields


def extra_fields(request: GenerateRequest, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Fields outside the OpenAI schema (top_k, backend extras), sent as they are.

    The backend's `extra_body` comes first, so a request's own settings win.
    """
    body = dict(defaults)
    if request.params.top_k is not None:
        body["top_k"] = request.params.top_k
    body.update(dict(request.params.extra))
    return body


def echo_score(logprobs: Any, span: ScoredSpan) -> tuple[float, bool]:
    """(sum of log-probabilities, is greedy) of a span's scored tokens from an echoed prompt.

    `logprobs` is a completions choice's `logprobs` object (token_logprobs, top_logprobs) for
    the prompt echoed back, possibly followed by one generated token, which is ignored. A token
    is greedy when its log-probability is the largest in its top list.
    """
    token_logprobs = getattr(logprobs, "token_logprobs", None)
    if token_logprobs is None:
        raise PermanentFailure(
            "the server returned no prompt log-probabilities (it ignored echo=True and logprobs)"
        )
    n_ids = len(span.input_ids)
    if len(token_logprobs) < n_ids:
        raise PermanentFailure(
            f"the server echoed {len(token_logprobs)} token log-probabilities for a prompt of "
            f"{n_ids} tokens; it must accept token-id prompts and echo all of them"
        )
    scored = token_logprobs[span.n_context : n_ids]
    if any(lp is None for lp in scored):
        raise PermanentFailure("the server returned null log-probabilities for prompt tokens")
    tops = getattr(logprobs, "top_logprobs", None)
    if tops is None or len(tops) < n_ids:
        raise PermanentFailure("the server returned no top_logprobs for the prompt tokens")
    is_greedy = all(
        bool(top) and lp >= max(top.values())
        for lp, top in zip(scored, tops[span.n_context : n_ids], strict=True)
    )
    return float(sum(scored)), is_greedy


def estimated_tokens(texts: Sequence[str]) -> int:
    """Token count of texts from their length, for rate limiting without a tokenizer."""
    return sum(len(t) for t in texts) // CHARS_PER_TOKEN + 1
