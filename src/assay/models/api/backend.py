"""The `LM` surface of the API backends: requests in, answers out, through a provider's SDK.

`_APIBackend` is what `openai-completions`, `openai-chat` (`openai`) and `anthropic-chat`
(`anthropic_chat`) share. It holds three parts: the `provider` (`provider.Provider`: the SDK,
its clients, batch API, usage, typed answers and rate-limit headers), its online calls
(`online_route.OnlineCalls`: the key, the `Session` that builds the SDK clients once, and the
`CallRunner` that paces, retries and admits the calls under the spending limit the backend is
built with, `spending=`: the run's `--max-cost`), and its batch route (`batch_route`). Requests
run concurrently, at most `num_concurrent` at once and fewer while the provider pushes back; a
request that still fails makes the whole call raise `APIRequestError` naming the failed
requests: a task is never scored on answers that did not arrive. With `batch_api=true`
generations go through the provider's batch API instead. `close` ends the clients and the
event loop's thread; the run calls it when it is done with the backend.

The API key is read from the environment variable named by `api_key_env`; a server that is not
on this machine is refused before the first request when the variable is unset. The key, and
every secret of the model args (URL user info, secret-looking `default_query` and
`default_headers` entries), are remembered by `util.redact`, which hides them from every output.

`GenerationOnly` refuses loglikelihoods for chat endpoints, which return no prompt
log-probabilities.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from assay.errors import ConfigError, ModelError
from assay.models.api.arrivals import Arrivals
from assay.models.api.batch_route import BatchRoute
from assay.models.api.budget import SpendingLimit
from assay.models.api.online_route import OnlineCalls
from assay.models.api.payloads import estimated_tokens, message_texts
from assay.models.api.provider import Provider
from assay.models.api.settings import PER_REQUEST_FIELDS, APISettings, check_settings, chunk_size
from assay.models.api.usage import UsageStats
from assay.models.base import LM, ModelProvenance
from assay.requests.types import (
    GenerateRequest,
    Generation,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RollingRequest,
    RollingResult,
)
from assay.util.redact import clean_text, redact_url, remember_in

R = TypeVar("R")


class _APIBackend(LM):
    """What every API backend shares: provider, session, runner, errors, generation."""

    name: ClassVar[str]
    provider: ClassVar[Provider]
    endpoint: ClassVar[str]
    """The path of the generation endpoint, as batch inputs name it (/v1/chat/completions)."""
    per_request_fields: ClassVar[frozenset[str]] = PER_REQUEST_FIELDS
    """Body fields every request sets itself: extra_body may not override them."""
    thinking_controls: tuple[str, ...] = ("thinking_budget", "reasoning_effort")
    has_batch_api = True
    spends = True

    @classmethod
    def unloaded(cls, model_args: Mapping[str, Any]) -> LM:
        """Built at once: a client loads nothing (it sends no request until asked)."""
        return cls(**model_args)

    def __init__(self, settings: APISettings, spending: SpendingLimit | None = None) -> None:
        """`spending`: the limit every request of this backend is admitted under (the run's
        `--max-cost`, shared with its judges); None spends without one."""
        if spending is not None and not isinstance(spending, SpendingLimit):
            raise ConfigError(
                f"--model {self.name}: spending={spending!r} is not a model arg; limit what a "
                "run spends with --max-cost USD."
            )
        check_settings(self.name, settings, self.per_request_fields)
        self.settings = settings
        remember_in(
            {
                "base_url": settings.base_url,
                "default_query": settings.default_query,
                "default_headers": settings.default_headers,
            }
        )
        self.batch_size = chunk_size(settings)
        self._calls = OnlineCalls(self.name, self.provider, settings, spending)
        self._batch = BatchRoute(self._calls, self.identity)
        self._tokenizer: Any = None

    # -- the LM protocol -------------------------------------------------------------------

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str | Generation]:
        """Generated text per request, cut at the request's stop strings."""
        index: dict[GenerateRequest, int] = {}  # each distinct request is sent once
        for r in requests:
            index.setdefault(r, len(index))
        calls, owners = list(index), [[index[r]] for r in requests]
        prompts = [self._prompt(r) for r in calls]

        def answer(j: int, response: Any) -> str | Generation:
            return self._answer(response, calls[j], prompts[j])

        def create_args(j: int) -> dict[str, Any]:
            return self._create_args(prompts[j], calls[j])

        if self.settings.batch_api:
            outcome = self._batch.run(
                len(calls), self.endpoint, create_args, answer, calls, self._request_key
            )
        else:
            arrivals = self._arrivals()

            def read(j: int, response: Any) -> str | Generation:
                result = answer(j, response)
                if arrivals is not None:
                    arrivals.add(self._request_key(calls[j]), result)
                return result

            outcome = self._calls.run(
                len(calls),
                lambda client, j: self._create(client, create_args(j)),
                read,
                lambda j: (self._count_tokens(prompts[j]), calls[j].params.max_gen_toks),
                arrivals,
            )
        return self._calls.gather(outcome, owners, lambda texts: texts[0], "generation", hint="")

    def identity(self) -> dict[str, Any]:
        """Backend, server, model, tokenizer and generation defaults (never the key)."""
        s = self.settings
        identity = {
            "backend": self.name,
            "base_url": s.base_url,
            "model": s.model,
            "tokenizer": s.tokenizer,
            "generation_defaults": self._generation_defaults(),
        }
        if s.default_query:  # only when set, so that existing caches keep their keys
            identity["default_query"] = s.default_query
        return identity

    def provenance(self) -> ModelProvenance:
        """Backend, served model and tokenizer."""
        s = self.settings
        return {"backend": self.name, "model": s.model, "tokenizer": s.tokenizer}

    def __repr__(self) -> str:
        s = self.settings
        return f"{type(self).__name__}(model={s.model!r}, base_url={redact_url(s.base_url)!r})"

    def live_status(self) -> str | None:
        """The batches being waited for, while a batch API run waits; else the pacing of
        requests (`conc 12/32 · 9.8 req/s · 429 ×3 · retries 5`) once any was sent."""
        if self._batch.running is not None:
            line = self._batch.running.status_line
            return clean_text(line) if line else line
        pacer = self._calls.pacer
        busy = self._calls.meter.totals()["requests"] or pacer.in_flight
        return pacer.status() if busy else None

    def usage_stats(self) -> UsageStats:
        """Running totals: requests answered, attempts repeated, 429/529 answers, tokens by
        kind and their cost in USD (None when a price is unknown), with the prices used."""
        return self._calls.meter.totals()

    def close(self) -> None:
        """Close the SDK clients and end the thread of their event loop (a later request opens
        them again)."""
        self._calls.close()

    # -- what the endpoints do differently --------------------------------------------------

    def _prompt(self, request: GenerateRequest) -> Any:
        raise NotImplementedError

    def _create_args(self, prompt: Any, request: GenerateRequest) -> dict[str, Any]:
        """The keyword arguments of the SDK call that generates for `request` (model, prompt,
        generation fields; `extra_body` holds the fields outside the SDK's schema)."""
        raise NotImplementedError

    async def _create(self, client: Any, args: dict[str, Any]) -> Any:
        """Send one generation (`_create_args`) and return the SDK's typed answer."""
        raise NotImplementedError

    def _answer(self, response: Any, request: GenerateRequest, prompt: Any) -> str | Generation:
        """The answer to `request` (sent as `prompt`) in one typed response: what the online
        and the batch paths both return."""
        raise NotImplementedError

    def _generation_defaults(self) -> dict[str, Any]:
        """The model args that shape every generation (part of the cache identity)."""
        raise NotImplementedError

    # -- the response cache and tokens ------------------------------------------------------

    @staticmethod
    def _arrivals() -> Arrivals | None:
        """Where online answers are filed as they arrive: the cache of the executor's chunk."""
        from assay.requests.cache import receiver

        cache = receiver()
        return Arrivals(cache) if cache is not None else None

    @staticmethod
    def _request_key(request: GenerateRequest) -> str:
        from assay.requests.cache import request_key

        return request_key(request)

    @property
    def tokenizer(self) -> Any:
        """The HF tokenizer named by the `tokenizer` arg, loaded on first use; None without one."""
        if self._tokenizer is None and self.settings.tokenizer:
            try:
                from transformers import AutoTokenizer

                self._tokenizer = AutoTokenizer.from_pretrained(self.settings.tokenizer)
            except ImportError:
                raise ModelError(
                    f"--model {self.name}: tokenizer= needs transformers; install assay[hf]."
                ) from None
            except (OSError, ValueError) as exc:
                raise ModelError(
                    f"--model {self.name}: could not load tokenizer {self.settings.tokenizer!r}: {exc}"
                ) from None
        return self._tokenizer

    def _count_tokens(self, prompt: Any) -> int:
        # Text only: what an image costs is the server's business (rate limits see the text).
        texts = [prompt] if isinstance(prompt, str) else message_texts(prompt)
        if self.tokenizer is None:
            return estimated_tokens(texts)
        return sum(len(self.tokenizer(t, add_special_tokens=False).input_ids) for t in texts)


class GenerationOnly:
    """A backend whose API generates but returns no log-probabilities of a prompt: its
    loglikelihood requests fail with `no_scores_reason`, naming what to use instead."""

    name: ClassVar[str]
    no_scores_reason: ClassVar[str]

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        """Always a ModelError (see `no_scores_reason`)."""
        raise self._no_scores("loglikelihood")

    def loglikelihood_rolling(self, requests: Sequence[RollingRequest]) -> list[RollingResult]:
        """Always a ModelError (see `no_scores_reason`)."""
        raise self._no_scores("loglikelihood_rolling")

    def _no_scores(self, what: str) -> ModelError:
        return ModelError(f"--model {self.name} cannot compute {what}: {self.no_scores_reason}")
