"""What goes into an OpenAI-compatible request and what is read back out of the answer.

Pure functions over plain values, so the translation is tested without a server.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import Any

from assay.errors import ModelError
from assay.images import IMAGE_PLACEHOLDER, DocImage, ImagePart, message_parts
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


def image_url(image: DocImage) -> str:
    """What an API receives for an image: an http(s) or data: URL as given (never fetched),
    anything else as a PNG data URL of its decoded pixels."""
    source = image.source
    if isinstance(source, str) and source.startswith(("http://", "https://", "data:")):
        return source
    buffer = io.BytesIO()
    image.load().save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def image_messages(
    prompt: str | Messages,
    images: Sequence[DocImage],
    *,
    max_images: int | None = None,
    interleave: bool = True,
    detail: str | None = None,
) -> list[dict[str, Any]]:
    """Chat messages whose `<image>` placeholders became OpenAI image content parts.

    The parts follow `assay.images.message_parts`, the rule every backend shares: images go, in
    order, where the messages say `<image>` (counted across messages), splitting the text when
    `interleave`, else first in their message with the placeholders removed from its text; at
    most `max_images` per message (None: all), later placeholders vanishing; a prompt without any
    placeholder gets its images after the text of its last user message. Messages without
    images keep their plain string content.

    Image parts hold the DocImage itself as their URL until `with_image_urls` encodes them at
    send time, so that a batch of requests never holds all its images encoded at once.
    A ModelError when the placeholders and the images do not pair up one to one.
    """
    messages: list[dict[str, Any]] = [dict(m) for m in as_messages(prompt)]
    if not images:
        return messages
    placeholders = sum(m["content"].count(IMAGE_PLACEHOLDER) for m in messages)
    if placeholders and placeholders != len(images):
        raise ModelError(
            f"a prompt has {placeholders} {IMAGE_PLACEHOLDER} placeholder(s) for {len(images)} "
            f"image(s); each image needs its own {IMAGE_PLACEHOLDER} in the prompt text (or "
            "none at all, to send every image after the text)."
        )
    chat = [(m["role"], m["content"]) for m in messages]
    limit = len(images) if max_images is None else max_images
    laid_out = message_parts(chat, len(images), max_images=limit, interleave=interleave)
    for message, (_, parts) in zip(messages, laid_out, strict=True):
        if IMAGE_PLACEHOLDER in message["content"] or any(isinstance(p, ImagePart) for p in parts):
            message["content"] = [
                _image_part(images[part.index], detail)
                if isinstance(part, ImagePart)
                else {"type": "text", "text": part}
                for part in parts
            ]
    return messages


def _image_part(image: DocImage, detail: str | None) -> dict[str, Any]:
    url: dict[str, Any] = {"url": image}
    if detail is not None:
        url["detail"] = detail
    return {"type": "image_url", "image_url": url}


def with_image_urls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`image_messages`' messages as sent: each image part's DocImage becomes its URL."""
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            content = [
                {
                    **part,
                    "image_url": {**part["image_url"], "url": image_url(part["image_url"]["url"])},
                }
                if part["type"] == "image_url"
                else part
                for part in content
            ]
        out.append({**message, "content": content})
    return out


def message_texts(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The text of chat messages, content parts included (image parts have none)."""
    texts: list[str] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif content is not None:
            texts += [part["text"] for part in content if part.get("type") == "text"]
    return texts


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
