"""replay: answers recorded earlier, matched by prompt, to re-score without a model."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from assay.errors import ConfigError, ModelError
from assay.models.args import Arg, AutoOrCount, BatchSize, typed_args
from assay.models.base import LM, cut_at_stops, register_model, stop_cut_reason
from assay.models.thinking import Thinking, split_thinking, thinking_args
from assay.requests.tools import ToolCall, Turn
from assay.requests.types import (
    GenerateRequest,
    Generation,
    LoglikelihoodRequest,
    RollingRequest,
    canonical_json,
)


def _turns(request: GenerateRequest) -> list[tuple[str, str]]:
    """A chat prompt's turns as (role, content), a conversation's tool turns included."""
    assert not isinstance(request.prompt, str)
    return [
        (turn.role, turn.content) if isinstance(turn, Turn) else (turn[0], turn[1])
        for turn in request.prompt
    ]


def _messages_key(turns: Sequence[tuple[str, str]]) -> str:
    """What a recorded chat prompt (a list of {"role", "content"}) is matched by."""
    return canonical_json([list(turn) for turn in turns])


def _with_tools(key: str, names: Sequence[str]) -> str:
    """A prompt's key narrowed to requests offering exactly these tools (a line's "tools")."""
    return canonical_json([key, list(names)])


def _prompt_keys(request: GenerateRequest) -> list[str]:
    """The keys a request is looked up by, in order: with the tools it offers, then without;
    a plain prompt's text, or a chat's whole conversation (recorded as a list of messages),
    then its last user message."""
    if isinstance(request.prompt, str):
        keys = [request.prompt]
    else:
        turns = _turns(request)
        users = [content for role, content in turns if role == "user"]
        keys = [_messages_key(turns), users[-1] if users else ""]
    names = [tool.name for tool in request.tools]
    return [_with_tools(key, names) for key in keys] + keys if names else keys


def _prompt_text(request: GenerateRequest) -> str:
    """How a request is named in messages: its text, or its last user message."""
    return _prompt_keys(request)[-1]


_ENDINGS = {
    "reasoning": str,
    "finish_reason": str,
    "thinking_closed": bool,
    "reasoning_tokens": int,
    "answer_tokens": int,
}
"""What a recorded response may say besides its text (a reasoning model's generation)."""
FINISH_REASONS = ("stop", "stop_sequence", "length", "tool_calls")


@dataclass(frozen=True)
class Recorded:
    """One recorded response: its text and, optionally, how the generation ended."""

    response: str
    ending: dict[str, Any] = field(default_factory=dict)
    """The keys of `_ENDINGS` the line gave."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The tools the model called (a line's "tool_calls")."""


class ReplayLM(LM):
    """Generation answers looked up by prompt text in a JSONL file of {"prompt", "response"}.

    A "response" answers every sample of its prompt. A line may give {"prompt", "responses":
    [...]} instead: the i-th sample of the prompt (a request's sample_index, e.g. a judge
    metric's judge_samples) gets the i-th response.

    A reasoning model's generation can be replayed too: a line (or an item of "responses",
    then an object with "response") may add "reasoning" (thinking a server returned apart),
    "finish_reason" (stop, stop_sequence, length or tool_calls), "thinking_closed", "reasoning_tokens"
    and "answer_tokens"; with `thinking` (think_end_token ...), "response" is the raw
    generation and its thinking is split off as `hf` splits it.

    Tool calls are replayed too (the backend accepts tools): "tool_calls" is a list of
    {"name", "arguments"} (arguments an object, or the text the model wrote, kept unparsed when
    it is not a JSON object; "id" and "raw" optional), and "response" may then be "" or left
    out. A chat or a conversation matches a line whose "prompt" is its list of {"role",
    "content"} messages exactly, or else a line whose "prompt" is its last user message; a
    line that gives "tools" (the names of the tools offered, in order) matches only requests
    offering exactly those, before any line without.
    """

    accepts_tools = True

    def __init__(
        self,
        path: str | Path,
        batch_size: BatchSize = "auto",
        thinking: Thinking | None = None,
    ) -> None:
        self.path = Path(path)
        self.batch_size = batch_size
        """Requests per cache commit (a whole number), or "auto" for the executor's default."""
        self.thinking = thinking
        self.responses: dict[str, list[Recorded]] = {}
        digest = hashlib.sha256()
        try:
            handle = self.path.open(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"--model-args path={self.path}: cannot read the responses file: {exc.strerror}."
            ) from None
        with handle:
            for number, line in enumerate(handle, 1):
                digest.update(line.encode())
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    prompt = _recorded_prompt(record["prompt"])
                    if "tools" in record:
                        tools = record["tools"]
                        if not isinstance(tools, list) or not all(
                            isinstance(t, str) for t in tools
                        ):
                            raise ValueError("tools")
                        # No tools offered is a request like any other without tools.
                        prompt = _with_tools(prompt, tools) if tools else prompt
                    answers = record.get("responses", [record])
                except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                    answers = None
                if not isinstance(answers, list):
                    answers = None
                recorded = [_recorded(a, f"{self.path}:{number}") for a in answers or []]
                if answers is None or None in recorded:
                    raise ConfigError(
                        f"{self.path}:{number}: each line must be a JSON object with 'prompt' (a "
                        "string, or a list of {'role', 'content'} messages; optionally 'tools', the "
                        "names of the tools offered) and 'response' (a string) and/or "
                        "'tool_calls', or 'responses' (a list of strings or objects, one per sample)."
                    ) from None
                self.responses[prompt] = recorded  # type: ignore[assignment]
        self.digest = digest.hexdigest()

    def _lookup(self, request: GenerateRequest) -> list[Recorded] | None:
        """The recorded answers of a request's prompt, by the first of its keys recorded."""
        for key in _prompt_keys(request):
            if key in self.responses:
                return self.responses[key]
        return None

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str | Generation]:
        found = [self._lookup(r) for r in requests]
        missing = [_prompt_text(r) for r, f in zip(requests, found) if f is None]
        short = [
            (r.sample_index, _prompt_text(r))
            for r, f in zip(requests, found)
            if f is not None and 1 < len(f) <= r.sample_index
        ]
        if short:
            index, prompt = short[0]
            raise ModelError(
                f"replay: {len(short)} request(s) ask for a sample the file {self.path} has no "
                f"response for, e.g. sample {index} of {prompt[:120]!r}; give that prompt "
                f'"responses": [...] with one response per sample.'
            )
        if missing:
            listing = "\n".join(f"  - {p[:120]!r}" for p in missing[:5])
            more = f"\n  ... and {len(missing) - 5} more" if len(missing) > 5 else ""
            raise ModelError(
                f"replay: {len(missing)} prompt(s) have no recorded response in {self.path}:\n{listing}{more}\n"
                "Record responses for exactly these prompts (the prompts in a samples file's arguments)."
            )
        untooled = [
            _prompt_text(r) for r, f in zip(requests, found) if not r.tools and _calls_tools(f)
        ]
        if untooled:
            raise ModelError(
                f"replay: {len(untooled)} request(s) offer no tools, but {self.path} records "
                f"tool calls for them, e.g. {untooled[0][:120]!r}; a model cannot call a tool "
                "it was not offered. Record a text response for these prompts."
            )
        out: list[str | Generation] = []
        for r, answers in zip(requests, found):
            assert answers is not None
            answer = answers[r.sample_index] if len(answers) > 1 else answers[0]
            out.append(self._with_calls(self._replayed(answer, r), answer))
        return out

    @staticmethod
    def _with_calls(result: str | Generation, answer: Recorded) -> str | Generation:
        """A replayed result with the answer's recorded tool calls."""
        if not answer.tool_calls:
            return result
        if isinstance(result, str):
            return Generation(result, tool_calls=answer.tool_calls)
        return replace(result, tool_calls=answer.tool_calls)

    def _replayed(self, answer: Recorded, request: GenerateRequest) -> str | Generation:
        """A recorded answer as the backend that produced it would have returned it."""
        until, ending = request.params.until, answer.ending
        if self.thinking is None and not ending:
            return cut_at_stops(answer.response, until)
        if "reasoning" in ending:
            # Thinking a server returned apart: the response is the answer alone.
            text = cut_at_stops(answer.response, until)
            closed = ending.get(
                "thinking_closed", not (ending.get("finish_reason") == "length" and not text)
            )
            finish = stop_cut_reason(ending.get("finish_reason"), answer.response, text)
            return Generation(
                text, **{**ending, "thinking_closed": closed, "finish_reason": finish}
            )
        prompt = request.prompt if isinstance(request.prompt, str) else ""
        generation = split_thinking(
            answer.response,
            until,
            self.thinking,
            opened=self.thinking is not None and self.thinking.opened_by(prompt),
            finish_reason=ending.get("finish_reason"),
            reasoning_tokens=ending.get("reasoning_tokens"),
            answer_tokens=ending.get("answer_tokens"),
        )
        if "thinking_closed" in ending:
            return replace(generation, thinking_closed=ending["thinking_closed"])
        return generation

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[Any]:
        raise ModelError("replay answers generation requests only; this task needs loglikelihoods.")

    def loglikelihood_rolling(self, requests: Sequence[RollingRequest]) -> list[Any]:
        raise ModelError(
            "replay answers generation requests only; this task needs rolling loglikelihoods."
        )

    @classmethod
    def unloaded(cls, model_args: Mapping[str, Any]) -> LM:
        """Built at once: it reads its file and loads nothing else."""
        return replay(**model_args)

    def identity(self) -> dict[str, Any]:
        identity: dict[str, Any] = {
            "backend": "replay",
            "path": str(self.path),
            "sha256": self.digest,
        }
        if self.thinking is not None:  # only when set: earlier caches stay valid
            identity["thinking"] = [self.thinking.end, self.thinking.start, self.thinking.budget]
        return identity


def _calls_tools(answers: list[Recorded] | None) -> bool:
    return any(answer.tool_calls for answer in answers or ())


def _recorded_prompt(prompt: Any) -> str:
    """A line's "prompt" as the key it is looked up by: a string as it is, a list of messages
    as `_messages_key`; ValueError for anything else."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in prompt
    ):
        return _messages_key([(m["role"], m["content"]) for m in prompt])
    raise ValueError("prompt")


def _recorded_calls(calls: Any, where: str) -> tuple[ToolCall, ...]:
    """A line's "tool_calls" as ToolCalls, each refused by position when it is not
    {"name": str, "arguments": object or str} (with optional string "id" and "raw")."""
    if not isinstance(calls, list):
        raise ConfigError(f"{where}: 'tool_calls' must be a list, got {calls!r:.80}.")
    out = []
    for i, call in enumerate(calls):
        ok = (
            isinstance(call, dict)
            and isinstance(call.get("name"), str)
            and isinstance(call.get("arguments"), dict | str)
            and all(isinstance(call.get(k), str | None) for k in ("id", "raw"))
        )
        if not ok:
            raise ConfigError(
                f"{where}: tool_calls[{i}] must be an object with 'name' (a string) and "
                f"'arguments' (an object, or the text the model wrote), got {call!r:.120}."
            )
        out.append(
            ToolCall.parsed(call["name"], call["arguments"], raw=call.get("raw"), id=call.get("id"))
        )
    return tuple(out)


def _recorded(item: Any, where: str) -> Recorded | None:
    """A "responses" item or a whole line as a Recorded; None when it is neither a string nor
    an object with a string "response" or "tool_calls" (a bad ending key or tool call is
    refused by name)."""
    if isinstance(item, str):
        return Recorded(item)
    if not isinstance(item, dict):
        return None
    calls = _recorded_calls(item["tool_calls"], where) if "tool_calls" in item else ()
    if not isinstance(item.get("response", "" if calls else None), str):
        return None
    ending = {k: v for k, v in item.items() if k in _ENDINGS}
    for key, value in ending.items():
        kind = _ENDINGS[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ConfigError(
                f"{where}: {key!r} must be {'a ' + kind.__name__}, got {value!r}."
            ) from None
    reason = ending.get("finish_reason")
    if reason is not None and reason not in FINISH_REASONS:
        raise ConfigError(
            f"{where}: finish_reason {reason!r}: give one of {', '.join(FINISH_REASONS)}."
        )
    return Recorded(item.get("response", ""), ending, calls)


@register_model("replay")
def replay(**model_args: Any) -> ReplayLM:
    """`--model replay --model-args path=FILE.jsonl` (`batch_size`: requests per cache commit)."""
    args = typed_args(
        "replay",
        model_args,
        {
            "path": Arg(str, ""),
            "batch_size": Arg(AutoOrCount, "auto"),
            "think_end_token": Arg(str, None, nullable=True),
            "think_start_token": Arg(str, None, nullable=True),
            "thinking_budget": Arg(int, None, nullable=True, minimum=0),
        },
    )
    if not args["path"]:
        raise ConfigError(
            '--model replay needs --model-args path=FILE.jsonl (lines of {"prompt", "response"}).'
        )
    thinking = thinking_args(
        "replay", args["think_end_token"], args["think_start_token"], args["thinking_budget"]
    )
    return ReplayLM(args["path"], args["batch_size"], thinking)
