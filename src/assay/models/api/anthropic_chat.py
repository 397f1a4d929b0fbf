"""Anthropic's Messages API: `--model anthropic-chat`, through the official `anthropic` client.

The same machinery as `openai-chat` (response cache, bounded concurrency, rpm/tpm limits,
retries with backoff and jitter, the batch API with `batch_api=true`), speaking Anthropic's
request shape: the system prompt apart from the turns, images as base64 `image` blocks,
`stop_sequences`, a required `max_tokens`, and extended thinking with `thinking_budget=N`
(`thinking={"type": "enabled", "budget_tokens": N}`). Answers are `Generation`s: the text
blocks are the answer, thinking blocks its reasoning, and `stop_reason` its finish reason
(end_turn: stop, max_tokens: length, stop_sequence: stop_sequence).

429, 529 (overloaded), 5xx, timeouts and lost connections are retried; other 4xx are not.
Chat endpoints return no prompt log-probabilities, so loglikelihoods are refused.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, ClassVar

from assay.models._decoding import decoding_of
from assay.models.api.anthropic_messages import (
    read_message,
    split_system,
    stop_sequences,
)
from assay.models.api.anthropic_provider import AnthropicProvider
from assay.models.api.backend import GenerationOnly, _APIBackend
from assay.models.api.budget import SpendingLimit
from assay.models.api.settings import SHARED_ARGS, APISettings
from assay.models.api.tool_payloads import (
    anthropic_calls,
    anthropic_tool_choice,
    anthropic_tools,
    anthropic_turns,
    openai_messages,
)
from assay.models.args import Arg, typed_args
from assay.models.base import cut_at_stops, register_model
from assay.requests.tools import is_conversation
from assay.requests.types import (
    GenerateRequest,
    Generation,
)

log = logging.getLogger(__name__)

MIN_THINKING_BUDGET = 1024
"""Anthropic's smallest `budget_tokens`."""

_ARGS: dict[str, Arg] = {
    **{k: v for k, v in SHARED_ARGS.items() if k not in ("seed", "default_query")},
    "base_url": Arg(str, "https://api.anthropic.com"),
    "api_key_env": Arg(str, "ANTHROPIC_API_KEY"),
    "max_stop_sequences": Arg(int, 16, minimum=0),
    "thinking_budget": Arg(int, None, nullable=True, minimum=MIN_THINKING_BUDGET),
    "max_images": Arg(int, None, nullable=True, minimum=1),
    "interleave": Arg(bool, True),
}


@register_model("anthropic-chat")
class AnthropicChatLM(GenerationOnly, _APIBackend):
    """Anthropic's `/v1/messages`: generation only.

    With --apply-chat-template the conversation is sent as turns (system prompt apart);
    without it the plain prompt becomes one user turn, as for openai-chat.
    """

    name = "anthropic-chat"
    endpoint = "/v1/messages"
    accepts_messages = True
    accepts_images = True
    thinking_controls = ("thinking_budget",)
    accepts_tools = True
    provider = AnthropicProvider()
    ARGS: ClassVar[dict[str, Arg]] = _ARGS
    per_request_fields = frozenset(
        {"model", "messages", "system", "max_tokens", "stop_sequences", "temperature", "top_p",
         "top_k", "thinking", "stream", "tools", "tool_choice"}
    )  # fmt: skip

    no_scores_reason = (
        "Anthropic's Messages API returns no log-probabilities, so multiple-choice and "
        "perplexity tasks cannot be scored with it. Run generative tasks, or score with a "
        "backend that reads log-probabilities (hf, vllm, openai-completions)."
    )

    def __init__(self, spending: SpendingLimit | None = None, **model_args: Any) -> None:
        args = typed_args(self.name, model_args, self.ARGS)
        super().__init__(APISettings(seed=None, default_query=None, **args), spending)
        self._warned_thinking = False

    def _generation_defaults(self) -> dict[str, Any]:
        s = self.settings
        defaults: dict[str, Any] = {
            "max_stop_sequences": s.max_stop_sequences,
            "extra_body": s.extra_body or {},
            "thinking_budget": s.thinking_budget,
        }
        images = {"max_images": None, "interleave": True}
        defaults.update({k: getattr(s, k) for k, v in images.items() if getattr(s, k) != v})
        return defaults

    # -- requests -------------------------------------------------------------------------

    def _prompt(self, request: GenerateRequest) -> list[dict[str, Any]]:
        # OpenAI-shaped messages (what rate limits count); a conversation with tool turns is
        # laid out in Anthropic's blocks by `_create_args`, from the request itself.
        s = self.settings
        return openai_messages(
            request.prompt, request.images, max_images=s.max_images, interleave=s.interleave
        )

    def _create_args(
        self, prompt: list[dict[str, Any]], request: GenerateRequest
    ) -> dict[str, Any]:
        s = self.settings
        if is_conversation(request.prompt):
            system, turns = anthropic_turns(
                request.prompt,  # type: ignore[arg-type]
                request.images,
                max_images=s.max_images,
                interleave=s.interleave,
            )
        else:
            system, turns = split_system(prompt)
        params = request.params
        budget = s.thinking_budget
        # max_tokens bounds thinking and answer together: the answer keeps its max_gen_toks.
        args: dict[str, Any] = {
            "model": s.model,
            "messages": turns,
            "max_tokens": params.max_gen_toks + (budget or 0),
        }
        if system is not None:
            args["system"] = system
        if request.tools:
            args["tools"] = anthropic_tools(request.tools)
        if request.tool_choice is not None:
            args["tool_choice"] = anthropic_tool_choice(request.tool_choice)
        extra = {**(s.extra_body or {}), **dict(params.extra)}
        if params.as_given:
            # The user's fields as written (run_evals configs), with the two OpenAI names
            # Anthropic spells otherwise; max_tokens is required, so max_gen_toks stands in.
            for name in ("max_tokens", "max_completion_tokens"):
                if name in extra:
                    args["max_tokens"] = extra.pop(name)
            if "stop" in extra:
                stop = extra.pop("stop")
                args["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
            return {**args, "extra_body": extra} if extra else args
        decoding = decoding_of(request, None)
        # The client's create() takes no sampling arguments: they travel as body fields.
        sampling: dict[str, Any] = {}
        if budget is not None:
            args["thinking"] = {"type": "enabled", "budget_tokens": budget}
            self._warn_thinking_sampling()
        else:
            sampling["temperature"] = decoding.temperature
            if decoding.top_p is not None:
                sampling["top_p"] = decoding.top_p
            if decoding.top_k is not None:
                sampling["top_k"] = decoding.top_k
        stops = stop_sequences(decoding.stops, s.max_stop_sequences)
        if stops:
            args["stop_sequences"] = stops
        if sampling or extra:
            args["extra_body"] = {**sampling, **extra}
        return args

    def _warn_thinking_sampling(self) -> None:
        if not self._warned_thinking:
            self._warned_thinking = True
            log.warning(
                "--model %s: with thinking_budget=%d the requests carry no temperature, top_p "
                "or top_k: Anthropic's extended thinking samples at its own default "
                "(temperature 1) and refuses other settings, so greedy tasks are sampled.",
                self.name,
                self.settings.thinking_budget,
            )

    async def _create(self, client: Any, args: dict[str, Any]) -> Any:
        return await client.messages.create(**args)

    def _answer(self, response: Any, request: GenerateRequest, prompt: Any) -> Generation:
        answer = read_message(response)
        return replace(
            answer,
            text=cut_at_stops(answer.text, request.params.until),
            tool_calls=anthropic_calls(response),
        )


__all__ = ["AnthropicChatLM"]
