"""OpenAI-compatible APIs: `--model openai-completions` and `--model openai-chat`.

Both speak to any server with the OpenAI API (OpenAI, vLLM, llama.cpp, `transformers serve`,
...) through the official `openai` client, on the shared machinery of `backend._APIBackend` and `openai_base.OpenAIBackend`
(concurrency, pacing, retries, usage and cost accounting, the batch API, key redaction).

`openai-chat` sends a doc's images as OpenAI `image_url` content parts where the prompt says
`<image>` (PNG data URLs; images given as http(s) or data: URLs pass through unfetched), for
any OpenAI-compatible vision-language server; `max_images`, `interleave` and `image_detail`
shape them.

Loglikelihoods need a completions server that echoes the log-probabilities of a token-id prompt
(`echo=True, logprobs=1, max_tokens=1`, as lm-eval asks), and a `tokenizer` to count context
tokens. Chat endpoints return no prompt log-probabilities, so `openai-chat` refuses them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, ClassVar, NamedTuple, TypeVar

from assay.errors import ModelError
from assay.models.api.backend import GenerationOnly
from assay.models.api.budget import SpendingLimit
from assay.models.api.openai_base import OpenAIBackend
from assay.models.api.payloads import as_messages, echo_score, with_image_urls
from assay.models.api.runner import PermanentFailure
from assay.models.api.settings import PER_REQUEST_FIELDS, SHARED_ARGS, APISettings
from assay.models.api.tool_payloads import (
    openai_calls,
    openai_messages,
    openai_tool_choice,
    openai_tools,
)
from assay.models.args import Arg, typed_args
from assay.models.base import ModelProvenance, TokenCounter, register_model
from assay.models.spans import ScoredSpan, loglikelihood_spans, rolling_spans
from assay.models.tokens import TokenizerView
from assay.prompts.chat import (
    ChatTemplate,
    Message,
    TokenizerChatTemplate,
    render_chat,
    template_sha256,
)
from assay.requests.tools import plain_prompt
from assay.requests.types import (
    GenerateRequest,
    Generation,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RollingRequest,
    RollingResult,
)

__all__ = ["OpenAIChatLM", "OpenAICompletionsLM"]

R = TypeVar("R")

_OPENAI_ARGS: dict[str, Arg] = {
    **SHARED_ARGS,
    "base_url": Arg(str, "https://api.openai.com/v1"),
    "api_key_env": Arg(str, "OPENAI_API_KEY"),
}
"""The shared args with OpenAI's server and key variable as defaults."""

_REASONING_ARGS: dict[str, Arg] = {
    "think_end_token": Arg(str, None, nullable=True),
    "think_start_token": Arg(str, None, nullable=True),
    "thinking_budget": Arg(int, None, nullable=True, minimum=0),
    "thinking_budget_field": Arg(str, "thinking_token_budget"),
    "reasoning_effort": Arg(str, None, nullable=True),
}
"""How the OpenAI backends treat a reasoning model: its inline thinking markers, and the
request fields that steer its thinking."""


@register_model("openai-completions")
class OpenAICompletionsLM(OpenAIBackend):
    """`/v1/completions`: generation, and loglikelihoods from echoed prompt logprobs."""

    name = "openai-completions"
    endpoint = "/v1/completions"
    ARGS: ClassVar[dict[str, Arg]] = {
        **_OPENAI_ARGS,
        **_REASONING_ARGS,
        "max_length": Arg(int, 2048, minimum=3),
        "add_bos_token": Arg(bool, None, nullable=True),
    }

    def __init__(self, spending: SpendingLimit | None = None, **model_args: Any) -> None:
        super().__init__(APISettings(**typed_args(self.name, model_args, self.ARGS)), spending)
        self._tokens: TokenizerView | None = None

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        """log P(continuation | context) and greediness, from the server's prompt logprobs."""
        view = self._view("loglikelihood")
        try:
            spans = loglikelihood_spans(view, requests, self.settings.max_length - 1)
        except ValueError as exc:
            raise ModelError(
                f"--model {self.name}: {exc} (max_length={self.settings.max_length})."
            ) from None
        return self._score(requests, [[s] for s in spans], "loglikelihood", _loglikelihood_result)

    def loglikelihood_rolling(self, requests: Sequence[RollingRequest]) -> list[RollingResult]:
        """Total log P(text) over disjoint windows of max_length - 2 tokens.

        Two tokens fewer than the hf backend's windows, as lm-eval's API backend: the echoed
        prompt holds the window plus its one context token, and the server generates one more.
        """
        view = self._view("loglikelihood_rolling")
        per_request = rolling_spans(view, requests, self.settings.max_length - 2)
        return self._score(requests, per_request, "loglikelihood_rolling", _rolling_result)

    def chat_template(self) -> ChatTemplate:
        """The chat template of the `tokenizer` arg (loaded on first use), for
        --apply-chat-template."""
        return self._render_chat

    def token_counter(self) -> TokenCounter | None:
        """Prompt tokens by the `tokenizer` arg (as the hf backend encodes); None without one."""
        if self.settings.tokenizer is None:
            return None
        return lambda texts: [len(ids) for ids in self._view("counting tokens").encode(texts)]

    def provenance(self) -> ModelProvenance:
        s = self.settings
        tokenizer = self.tokenizer if s.tokenizer else None
        return {
            **super().provenance(),
            "chat_template_sha256": template_sha256(tokenizer) if tokenizer else None,
            "max_length": s.max_length,
            "add_bos_token": s.add_bos_token,
        }

    def identity(self) -> dict[str, Any]:
        s = self.settings
        return {**super().identity(), "max_length": s.max_length, "add_bos_token": s.add_bos_token}

    # -- generation ---------------------------------------------------------------------------

    def _prompt(self, request: GenerateRequest) -> str:
        prompt = plain_prompt(request.prompt, self.name)
        if isinstance(prompt, str):
            return prompt
        text = render_chat(self._render_chat, as_messages(prompt))
        # The server tokenises a text prompt with the tokenizer's special tokens; when those
        # include BOS, a template that writes BOS itself would get a second one.
        bos, tok = self.tokenizer.bos_token, self.tokenizer
        if bos and text.startswith(bos) and tok("x").input_ids[:1] == [tok.bos_token_id]:
            text = text[len(bos) :]
        return text

    def _create_args(self, prompt: str, request: GenerateRequest) -> dict[str, Any]:
        return {
            "model": self.settings.model,
            "prompt": prompt,
            **self._generation_fields(request, "max_tokens"),
        }

    async def _create(self, client: Any, args: dict[str, Any]) -> Any:
        return await client.completions.create(**args)

    def _render_chat(
        self,
        messages: Sequence[Message],
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
    ) -> str:
        template = TokenizerChatTemplate(
            self._view("a chat template").tokenizer,
            missing=f"--model {self.name}: tokenizer {self.settings.tokenizer!r} has no chat "
            "template; drop --apply-chat-template or use --model openai-chat.",
        )
        return template(messages, add_generation_prompt, continue_final_message)

    # -- scoring ------------------------------------------------------------------------------

    def _score(
        self,
        requests: Sequence[LoglikelihoodRequest] | Sequence[RollingRequest],
        per_request: list[list[ScoredSpan]],
        what: str,
        combine: Callable[[list[SpanScore]], R],
    ) -> list[R]:
        """Per request, `combine` of the scores of its spans, each distinct span sent once.

        A request's result enters the response cache as soon as its last span is answered
        (`Arrivals`), so an interrupt loses only the spans in flight, as for generations."""
        from assay.requests.cache import request_key

        index: dict[ScoredSpan, int] = {}
        for spans in per_request:
            for span in spans:
                index.setdefault(span, len(index))
        unique = list(index)
        owners = [[index[s] for s in spans] for spans in per_request]
        arrivals = self._arrivals()
        users: dict[int, list[int]] = {}
        for i, calls in enumerate(owners):
            for j in set(calls):
                users.setdefault(j, []).append(i)
        left = [len(set(calls)) for calls in owners]
        scored: dict[int, SpanScore] = {}

        def arrived(j: int, score: SpanScore) -> None:
            """File each request whose spans are now all answered."""
            if arrivals is None:
                return
            scored[j] = score
            for i in users[j]:
                left[i] -= 1
                if left[i] == 0:
                    parts = [scored[k] for k in owners[i]]
                    arrivals.add(request_key(requests[i]), combine(parts))

        def args(j: int) -> dict[str, Any]:
            return {
                "model": self.settings.model,
                "prompt": list(unique[j].input_ids),
                "max_tokens": 1,
                "temperature": 0,
                "logprobs": 1,
                "echo": True,
            }

        def read(j: int, response: Any) -> SpanScore:
            if not response.choices:
                raise PermanentFailure("the server answered with no choices")
            logprob, greedy = echo_score(response.choices[0].logprobs, unique[j])
            return SpanScore(logprob, greedy, unique[j].n_scored)

        if self.settings.batch_api:
            outcome = self._batch.run(len(unique), self.endpoint, args, read)
        else:

            def score(j: int, response: Any) -> SpanScore:
                result = read(j, response)
                arrived(j, result)
                return result

            outcome = self._calls.run(
                len(unique),
                lambda client, j: client.completions.create(**args(j)),
                score,
                lambda j: (len(unique[j].input_ids), 1),
                arrivals,
            )
        hint = (
            f"{what} needs a /v1/completions server that accepts token-id prompts and echoes their "
            "log-probabilities (echo=True, logprobs=1), such as vLLM; chat-only servers cannot score."
        )
        return self._calls.gather(outcome, owners, combine, what, hint)

    def _view(self, what: str) -> TokenizerView:
        """lm-eval's tokenisation rules over the `tokenizer` arg, which `what` needs."""
        if self.tokenizer is None:
            raise ModelError(
                f"--model {self.name}: {what} needs tokenizer=<HF tokenizer id or path of the served "
                "model> in --model-args, to count tokens."
            )
        if self._tokens is None:
            self._tokens = TokenizerView(self.tokenizer, self.settings.add_bos_token)
        return self._tokens


class SpanScore(NamedTuple):
    """What the server's echoed logprobs say of one scored span."""

    logprob: float
    is_greedy: bool
    n_scored: int
    """Tokens it scores (a rolling window's)."""


def _loglikelihood_result(parts: list[SpanScore]) -> LoglikelihoodResult:
    return LoglikelihoodResult(parts[0].logprob, parts[0].is_greedy)


def _rolling_result(parts: list[SpanScore]) -> RollingResult:
    return RollingResult(sum(p.logprob for p in parts), sum(p.n_scored for p in parts))


@register_model("openai-chat")
class OpenAIChatLM(GenerationOnly, OpenAIBackend):
    """`/v1/chat/completions`: generation only.

    With --apply-chat-template the server receives the conversation as messages (system turn,
    few-shot turns) and applies its own template; without it the plain prompt becomes one user
    message, as in lm-eval.
    """

    name = "openai-chat"
    endpoint = "/v1/chat/completions"
    accepts_messages = True
    accepts_images = True
    accepts_tools = True
    ARGS: ClassVar[dict[str, Arg]] = {
        **_OPENAI_ARGS,
        **_REASONING_ARGS,
        "max_tokens_field": Arg(str, "max_tokens", choices=("max_tokens", "max_completion_tokens")),
        "max_images": Arg(int, None, nullable=True, minimum=1),
        "interleave": Arg(bool, True),
        "image_detail": Arg(str, None, nullable=True, choices=("auto", "low", "high")),
        "parallel_tool_calls": Arg(bool, None, nullable=True),
    }
    per_request_fields = PER_REQUEST_FIELDS | {
        "tools",
        "tool_choice",
        "parallel_tool_calls",
    }

    def __init__(self, spending: SpendingLimit | None = None, **model_args: Any) -> None:
        super().__init__(APISettings(**typed_args(self.name, model_args, self.ARGS)), spending)

    no_scores_reason = (
        "chat completions endpoints return no log-probabilities of the prompt, so "
        "multiple-choice and perplexity tasks cannot be scored. Use --model openai-completions "
        "with the base_url of a server whose /v1/completions echoes prompt logprobs (echo=True, "
        "logprobs=1), such as vLLM, and tokenizer=<the served model's HF tokenizer>."
    )

    def _generation_defaults(self) -> dict[str, Any]:
        s = self.settings
        defaults = {**super()._generation_defaults(), "max_tokens_field": s.max_tokens_field}
        # Image settings only when changed, so that caches of text runs keep their keys.
        images = {
            "max_images": None,
            "interleave": True,
            "image_detail": None,
            "parallel_tool_calls": None,
        }
        defaults.update({k: getattr(s, k) for k, v in images.items() if getattr(s, k) != v})
        return defaults

    def _prompt(self, request: GenerateRequest) -> list[dict[str, Any]]:
        s = self.settings
        return openai_messages(
            request.prompt,
            request.images,
            max_images=s.max_images,
            interleave=s.interleave,
            detail=s.image_detail,
        )

    def _create_args(
        self, prompt: list[dict[str, Any]], request: GenerateRequest
    ) -> dict[str, Any]:
        args = {
            "model": self.settings.model,
            "messages": with_image_urls(prompt),
            **self._generation_fields(request, self.settings.max_tokens_field),
        }
        if request.tools:
            args["tools"] = openai_tools(request.tools)
            if self.settings.parallel_tool_calls is not None:
                args["parallel_tool_calls"] = self.settings.parallel_tool_calls
        if request.tool_choice is not None:
            args["tool_choice"] = openai_tool_choice(request.tool_choice)
        return args

    async def _create(self, client: Any, args: dict[str, Any]) -> Any:
        return await client.chat.completions.create(**args)

    def _answer(self, response: Any, request: GenerateRequest, prompt: Any) -> str | Generation:
        answer = super()._answer(response, request, prompt)
        calls = openai_calls(getattr(response.choices[0], "message", None))
        if not calls or not isinstance(answer, Generation):
            return answer
        return replace(answer, tool_calls=calls)
