"""What a model is asked (requests) and what it answers (results).

Backends see only these plain values; which doc and repeat a request belongs to is tracked by the
executor, so a backend never needs to know about tasks.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from assay.errors import ConfigError
from assay.images import DocImage

if TYPE_CHECKING:
    from assay.requests.tools import Conversation, ToolCall, ToolSpec


class RequestKind(StrEnum):
    """The three things every backend can do."""

    LOGLIKELIHOOD = "loglikelihood"
    LOGLIKELIHOOD_ROLLING = "loglikelihood_rolling"
    GENERATE_UNTIL = "generate_until"


_CANONICAL = json.JSONEncoder(sort_keys=True, default=str)
"""json.dumps(value, sort_keys=True, default=str) builds this encoder on every call."""


def canonical_json(value: Any) -> str:
    """One text per value whatever the key order: what requests are hashed and cached by.

    Values JSON cannot hold are written as their ``str()``.
    """
    return _CANONICAL.encode(value)


Messages = tuple[tuple[str, str], ...]
"""A chat as ((role, content), ...): hashable, so identical requests dedupe."""


@dataclass(frozen=True, slots=True)
class GenParams:
    """Generation settings of one request, normalised as lm-eval does."""

    until: tuple[str, ...] = ()
    """Stop strings: the output is cut before the first occurrence of any of them."""
    max_gen_toks: int = 256
    """Maximum number of new tokens."""
    do_sample: bool = False
    """Sample instead of greedy decoding."""
    temperature: float = 0.0
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    """Sampling seed; with a seed, the i-th sample of a request is reproducible on its own."""
    extra: tuple[tuple[str, Any], ...] = ()
    """Other backend keyword arguments, sorted by key; values may be dicts and lists (an API's
    ``response_format``), which is why the hash below does not hash the fields themselves."""

    fit_context: bool = False
    """The generation length of prompts kept whole: `max_gen_toks` is a ceiling that shrinks to the room the
    prompt leaves in the context window (the prompt is kept whole when it fits), instead of
    lm-eval's, where the prompt is left-truncated to make room for all of `max_gen_toks`."""
    as_given: bool = False
    """API backends send `extra` alone, as the user wrote it, and none of their own defaults
    (temperature, seed, max tokens); the other fields then only inform rate limits."""

    def __hash__(self) -> int:
        # Requests are deduplicated and grouped in dicts keyed by request: hashing the
        # canonical JSON keeps a dict or list in `extra` from failing the rows that carry it.
        return hash(canonical_json(self.as_dict()))

    def as_dict(self) -> dict[str, Any]:
        """lm-eval style gen_kwargs dict (as written in samples files)."""
        if self.as_given:
            return {"as_given": True, **dict(self.extra)}
        out: dict[str, Any] = {"until": list(self.until), "max_gen_toks": self.max_gen_toks}
        out["do_sample"] = self.do_sample
        out["temperature"] = self.temperature
        for key in ("top_p", "top_k", "seed"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.fit_context:
            out["fit_context"] = True
        out.update(dict(self.extra))
        return out


@dataclass(frozen=True, slots=True)
class LoglikelihoodRequest:
    """log P(continuation | context)."""

    context: str
    continuation: str
    images: tuple[DocImage, ...] = ()
    """The doc's images, placed where the context says `<image>` (multimodal backends)."""


@dataclass(frozen=True, slots=True)
class RollingRequest:
    """log P(text), over rolling windows of the model's maximum length."""

    text: str


@dataclass(frozen=True, slots=True)
class GenerateRequest:
    """Generate from a prompt (plain text, chat messages for chat backends, or a
    `requests.tools.Conversation` whose turns carry tool calls and results for backends that
    accept tools)."""

    prompt: str | Messages | Conversation
    params: GenParams = field(default_factory=GenParams)
    sample_index: int = 0
    """Which of the doc's samples this is; only matters when sampling."""
    images: tuple[DocImage, ...] = ()
    """The doc's images, placed where the prompt says `<image>` (multimodal backends)."""
    tools: tuple[ToolSpec, ...] = ()
    """Functions the model may call (backends with `accepts_tools`); empty: a plain request."""
    tool_choice: str | None = None
    """"auto", "none", "required", or a tool's name; None: the provider's default."""


Request = LoglikelihoodRequest | RollingRequest | GenerateRequest


class LoglikelihoodResult(NamedTuple):
    """Answer to a LoglikelihoodRequest; unpacks like lm-eval's (logprob, is_greedy) tuple."""

    logprob: float
    """Sum of the continuation tokens' log-probabilities (natural log)."""
    is_greedy: bool
    """Whether greedy decoding would have produced exactly the continuation."""


@dataclass(frozen=True, slots=True)
class RollingResult:
    """Answer to a RollingRequest."""

    logprob: float
    """Sum of log-probabilities of every token of the text (natural log)."""
    n_tokens: int = 0
    """Number of tokens scored."""


FinishReason = str
"""Why a generation ended: "stop" (end of sequence), "stop_sequence" (a stop string),
"length" (max_gen_toks, or a thinking budget, was reached first) or "tool_calls" (the model
stopped to call tools)."""


@dataclass(frozen=True, slots=True)
class Generation:
    """A generation with what a backend knows about how it ended and what it thought.

    `LM.generate_until` may return one per request instead of a plain string. `text` is the
    answer with the thinking removed: what filters and metrics see (the run's
    --unclosed-thinking policy decides what they see when the thinking never closed).
    """

    text: str
    """The answer: the generated text after the thinking, cut at the stop strings. When the
    thinking never closed (`thinking_closed` False) it is what lm-eval would score instead
    (its `split(think_end)[-1]` rule leaves the unfinished thought, cut at the stop strings;
    a server that returns the thinking in a field of its own leaves its answer field); the
    run's --unclosed-thinking policy empties it by default."""
    reasoning: str | None = None
    """The thinking as generated, before the end-of-thinking marker (an opening marker the
    model wrote itself included); None when the model did not think or the backend does not
    say."""
    finish_reason: FinishReason | None = None
    """"stop", "stop_sequence" or "length"; None when the backend does not know."""
    thinking_closed: bool | None = None
    """True: the thinking ended before the answer; False: the generation stopped while still
    thinking, or thought longer than its thinking budget; None: the model did not think."""
    reasoning_tokens: int | None = None
    """Tokens spent thinking, when the backend counts them."""
    answer_tokens: int | None = None
    """Tokens of the answer, when the backend counts them."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The tools the model called, in the order it called them (requests that offer tools)."""

    def __str__(self) -> str:
        # Callers that only want an answer (str(result)) get the default policy's answer:
        # never an unfinished thought.
        return "" if self.thinking_closed is False else self.text

    @property
    def has_metadata(self) -> bool:
        """Whether it says more than its text (a plain string would say as much otherwise)."""
        return any(
            value is not None
            for value in (
                self.reasoning,
                self.finish_reason,
                self.thinking_closed,
                self.reasoning_tokens,
                self.answer_tokens,
            )
        ) or bool(self.tool_calls)


Result = LoglikelihoodResult | RollingResult | Generation | str


def kind_of(request: Request) -> RequestKind:
    """The kind of a request."""
    if isinstance(request, LoglikelihoodRequest):
        return RequestKind.LOGLIKELIHOOD
    if isinstance(request, RollingRequest):
        return RequestKind.LOGLIKELIHOOD_ROLLING
    return RequestKind.GENERATE_UNTIL


DEFAULT_MAX_GEN_TOKS = 256
MAX_TOKEN_ALIASES = ("max_gen_toks", "max_new_tokens", "max_tokens", "max_completion_tokens")
"""The names gen_kwargs accept for the generation length; all mean max_gen_toks."""
_N = TypeVar("_N", int, float)


def lm_eval_gen_kwargs(
    task_kwargs: dict[str, Any] | None, fewshot_delimiter: str
) -> dict[str, Any]:
    """A generative task's gen_kwargs as lm-eval states them (and writes them in samples files).

    The task's generation_kwargs with `until` defaulting to the few-shot delimiter and the
    temperature as a float, or lm-eval's greedy defaults when the task sets none.
    """
    if task_kwargs is None:
        return {
            "temperature": 0.0,
            "do_sample": False,
            "max_gen_toks": DEFAULT_MAX_GEN_TOKS,
            "until": [fewshot_delimiter],
        }
    out = dict(task_kwargs)
    temperature = out.get("temperature")
    if isinstance(temperature, int) or (
        isinstance(temperature, str) and temperature.replace(".", "", 1).isdigit()
    ):
        out["temperature"] = float(temperature)
    out.setdefault("until", [fewshot_delimiter])
    return out


def merge_gen_kwargs(kwargs: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`kwargs` (lm-eval's gen_kwargs) with `overrides` (--gen-kwargs) winning; an override of
    the generation length under any of its names replaces the task's, as max_gen_toks."""
    merged, rest = dict(kwargs), dict(overrides)
    given = [k for k in MAX_TOKEN_ALIASES if k in rest]
    if given:
        set_max_gen_toks(merged, rest.pop(given[0]))
    merged.update(rest)
    return merged


def set_max_gen_toks(kwargs: dict[str, Any], value: Any) -> None:
    """Set the generation length in lm-eval's gen_kwargs, dropping its other names."""
    for alias in MAX_TOKEN_ALIASES[1:]:
        kwargs.pop(alias, None)
    kwargs["max_gen_toks"] = value  # in place when present: samples files keep lm-eval's key order


def normalize_gen_kwargs(
    kwargs: dict[str, Any], *, default_until: list[str], source: str = "gen_kwargs"
) -> GenParams:
    """lm-eval's gen_kwargs rules as one GenParams.

    max_new_tokens / max_tokens / max_completion_tokens are other names of max_gen_toks
    (default 256; two of them with different values are refused); with do_sample unset, temperature > 0 means sampling; do_sample=False forces
    temperature 0; `until` may be a string; a missing `until` means the few-shot delimiter;
    `fit_context` (assay's) asks for a generation that shrinks to fit (`GenParams.fit_context`).
    A value of the wrong type or range raises a ConfigError naming the key and `source` (the
    flag or task field the kwargs came from).
    """
    rest = dict(kwargs)
    until = rest.pop("until", None)
    if until is None:
        until = list(default_until)
    elif isinstance(until, str):
        until = [until]
    elif not isinstance(until, list | tuple) or not all(isinstance(u, str) for u in until):
        raise ConfigError(
            f"{source}: 'until' must be a string or a list of strings, got {until!r}."
        )
    max_key, max_toks = "max_gen_toks", DEFAULT_MAX_GEN_TOKS
    found = {k: rest.pop(k) for k in MAX_TOKEN_ALIASES if k in rest}
    if found:
        max_key, max_toks = next(iter(found.items()))
    max_toks = _number(max_toks, max_key, source, int, low=1)
    for key, value in found.items():
        # Two names for one limit that disagree: honouring either would ignore the other.
        if _number(value, key, source, int, low=1) != max_toks:
            raise ConfigError(
                f"{source}: {max_key}={found[max_key]!r} and {key}={value!r} both set the "
                "generation length (max_gen_toks); give one."
            )
    temperature = _number(rest.pop("temperature", None) or 0.0, "temperature", source, float, low=0)
    do_sample = rest.pop("do_sample", None)
    if isinstance(do_sample, str):
        do_sample = do_sample.lower() == "true"
    if do_sample is None:
        do_sample = temperature > 0.0
    elif not do_sample:
        temperature = 0.0
    top_p, top_k, seed = rest.pop("top_p", None), rest.pop("top_k", None), rest.pop("seed", None)
    fit_context = rest.pop("fit_context", False)
    if isinstance(fit_context, str) and fit_context.lower() in ("true", "false"):
        fit_context = fit_context.lower() == "true"
    if not isinstance(fit_context, bool):
        raise ConfigError(f"{source}: 'fit_context' must be true or false, got {fit_context!r}.")
    return GenParams(
        until=tuple(until),
        max_gen_toks=max_toks,
        do_sample=bool(do_sample),
        temperature=temperature,
        top_p=_number(top_p, "top_p", source, float, low=0, high=1) if top_p is not None else None,
        top_k=_number(top_k, "top_k", source, int) if top_k is not None else None,
        seed=_number(seed, "seed", source, int) if seed is not None else None,
        fit_context=fit_context,
        extra=tuple(sorted(rest.items())),
    )


def _number(
    value: Any,
    key: str,
    source: str,
    kind: type[_N],
    low: float | None = None,
    high: float | None = None,
) -> _N:
    """`value` as a finite `kind` within [low, high], else a ConfigError naming `key`."""
    try:
        number = kind(value)
        # int() truncates 2.5 and accepts True; neither is what the user meant.
        valid = not isinstance(value, bool) and math.isfinite(number) and number == float(value)
    except (TypeError, ValueError, OverflowError):
        valid = False
    if valid and (low is None or number >= low) and (high is None or number <= high):
        return number
    what = "a whole number" if kind is int else "a number"
    if low is not None and high is not None:
        what += f" from {low} to {high}"
    elif low is not None:
        what += f" >= {low}"
    raise ConfigError(f"{source}: {key!r} must be {what}, got {value!r}.")
