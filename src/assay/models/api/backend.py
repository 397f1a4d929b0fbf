"""The `LM` surface of the API backends: requests in, answers out, through a provider's SDK.

`_APIBackend` is what `openai-completions`, `openai-chat` (`openai`) and `anthropic-chat`
(`anthropic_chat`) share. It holds three parts: the `provider` (`provider.Provider`: the SDK,
its clients, batch API, usage, typed answers and rate-limit headers), the `Session` that builds
the SDK clients once and reuses them, and the `CallRunner` (`runner`) that paces, retries and
admits the calls under the run's `--max-cost`. Requests run concurrently, at most
`num_concurrent` at once and fewer while the provider pushes back; a request that still fails
makes the whole call raise `APIRequestError` naming the failed requests: a task is never scored
on answers that did not arrive. With `batch_api=true` generations go through the provider's
batch API instead (`batch_route`).

The API key is read from the environment variable named by `api_key_env`; a server that is not
on this machine is refused before the first request when the variable is unset. The key, and
every secret of the model args (URL user info, secret-looking `default_query` and
`default_headers` entries), are remembered by `util.redact`, which hides them from every output.

`GenerationOnly` refuses loglikelihoods for chat endpoints, which return no prompt
log-probabilities.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from assay.errors import ConfigError, ModelError
from assay.models.api.arrivals import Arrivals
from assay.models.api.batch_route import run_batch
from assay.models.api.batches import BatchRun
from assay.models.api.budget import active_limit
from assay.models.api.gathering import gather
from assay.models.api.pacing import Limits, Pacer
from assay.models.api.payloads import estimated_tokens, message_texts
from assay.models.api.provider import Key, Provider, classified, is_loopback
from assay.models.api.runner import CallOutcome, CallRunner, RetryPolicy
from assay.models.api.session import Session
from assay.models.api.settings import PER_REQUEST_FIELDS, APISettings
from assay.models.api.usage import UsageMeter, UsageStats, model_prices
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

log = logging.getLogger(__name__)
R = TypeVar("R")

BATCH_API_CHUNK = 50_000
"""Requests per executor chunk with batch_api=true (when batch_size is "auto"): OpenAI's
per-batch limit, so a task of that size is submitted at once."""


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

    @classmethod
    def unloaded(cls, model_args: Mapping[str, Any]) -> LM:
        """Built at once: a client loads nothing (it sends no request until asked)."""
        return cls(**model_args)

    def __init__(self, settings: APISettings) -> None:
        overridden = sorted(self.per_request_fields & set(settings.extra_body or {}))
        if overridden:
            raise ConfigError(
                f"--model {self.name}: extra_body sets {', '.join(overridden)}, which every request "
                "sets itself; put sampling settings in --gen-kwargs or the task's "
                "generation_kwargs instead."
            )
        self.settings = settings
        remember_in(
            {
                "base_url": settings.base_url,
                "default_query": settings.default_query,
                "default_headers": settings.default_headers,
            }
        )
        self.batch_size = settings.batch_size
        if settings.batch_api and not isinstance(settings.batch_size, int):
            # One chunk, hence one set of batches submitted together, for up to a provider
            # batch's worth of requests: chunks of the online default would wait in turn.
            self.batch_size = BATCH_API_CHUNK
        if settings.batch_discount is not None and settings.batch_discount > 1:
            raise ConfigError(
                f"--model {self.name}: batch_discount={settings.batch_discount:g} is the fraction "
                "of the price taken off through a batch API, between 0 and 1 (0.5: half price)."
            )
        if settings.batch_api and not (settings.batch_dir or settings.batch_cache):
            raise ConfigError(
                f"--model {self.name}: batch_api=true needs a folder to record submitted "
                "batches in, so that a re-run never pays for them twice: give --output-dir or "
                "--cache to assay run, or batch_dir=<folder> in the model args."
            )
        self._key = Key(os.environ.get(settings.api_key_env))
        s = settings
        self._pacer = Pacer(s.num_concurrent, Limits(s.rpm, s.tpm, s.itpm, s.otpm))
        self._meter = UsageMeter(
            model_prices(s.model, s.price_in, s.price_out, s.price_cached_in, s.batch_discount)
        )
        self._runner = CallRunner(
            self.name, self._pacer, RetryPolicy(s.max_retries, max_wait=s.max_wait), self._meter
        )
        self._session = Session(self._client, self._new_sync_client)
        self._tokenizer: Any = None
        self._batches: BatchRun | None = None
        """The batch run being waited for (batch API only)."""
        self._landing: Any = None
        """The response cache that batch answers enter as they download, once opened."""

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
            outcome = self._run_batch(len(calls), self.endpoint, create_args, answer, calls)
        else:
            arrivals = self._arrivals()

            def read(j: int, response: Any) -> str | Generation:
                result = answer(j, response)
                if arrivals is not None:
                    arrivals.add(self._request_key(calls[j]), result)
                return result

            outcome = self._run(
                len(calls),
                lambda client, j: self._create(client, create_args(j)),
                read,
                lambda j: (self._count_tokens(prompts[j]), calls[j].params.max_gen_toks),
                arrivals,
            )
        return self._gather(outcome, owners, lambda texts: texts[0], "generation", hint="")

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
        if self._batches is not None:
            line = self._batches.status_line
            return clean_text(line) if line else line
        busy = self._meter.totals()["requests"] or self._pacer.in_flight
        return self._pacer.status() if busy else None

    def usage_stats(self) -> UsageStats:
        """Running totals: requests answered, attempts repeated, 429/529 answers, tokens by
        kind and their cost in USD (None when a price is unknown), with the prices used."""
        return self._meter.totals()

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

    # -- calls ------------------------------------------------------------------------------

    def _run(
        self,
        n_calls: int,
        send: Callable[[Any, int], Awaitable[Any]],
        read: Callable[[int, Any], R],
        tokens: Callable[[int], tuple[float, float]],
        arrivals: Arrivals | None = None,
    ) -> CallOutcome[R]:
        """`read(j, await send(client, j))` for every j, by this backend's runner and client.

        `tokens(j)` is call j's (prompt tokens, requested output tokens), for token rate limits.
        `arrivals`, which `read` files its answers in, is committed every window meanwhile and
        once more at the end, whatever ends the run (an interrupt included).
        """
        if n_calls == 0:
            return CallOutcome([])
        self._require_key()
        spending = active_limit()
        self._runner.check(spending, self.settings.model)
        sdk, timeout = self.provider.sdk(self.name), self.settings.timeout

        async def run() -> CallOutcome[R]:
            client = self._session.client()
            flushing = asyncio.create_task(arrivals.keep_flushing()) if arrivals else None
            try:
                return await self._runner.run(
                    n_calls,
                    lambda j: classified(
                        self.provider, sdk, send(client, j), timeout, self._status_hint
                    ),
                    read,
                    usage=self.provider.usage,
                    tokens=tokens,
                    spending=spending,
                )
            finally:
                if flushing is not None:
                    flushing.cancel()

        try:
            outcome = self._session.run(run)
        finally:
            if arrivals is not None:
                arrivals.flush()
        if outcome.retries:
            log.info(
                "%s: %d attempt(s) repeated, %d of them after a 429/529",
                self.name,
                outcome.retries,
                outcome.rate_limited,
            )
        return outcome

    def _run_batch(
        self,
        n_calls: int,
        endpoint: str,
        create_args: Callable[[int], dict[str, Any]],
        answer: Callable[[int, Any], R],
        landing: Sequence[GenerateRequest] | None = None,
    ) -> CallOutcome[R]:
        """`answer(j, response)` for every call j, through the provider's batch API (see
        `batch_route.run_batch`); with `landing`, answers enter the response cache as each
        batch downloads."""
        if n_calls == 0:
            return CallOutcome([])
        self._require_key()
        self.provider.sdk(self.name)  # a missing SDK is named with this backend
        s = self.settings

        def read(j: int, body: dict[str, Any]) -> R:
            return answer(j, self.provider.typed_answer(body, endpoint))

        return run_batch(
            self._batch_provider(self._sync_client(), endpoint),
            s,
            n_calls,
            create_args,
            read,
            record=lambda body: self._meter.record(
                self.provider.usage(body.get("usage")), batch=True
            ),
            land=self._request_key if landing is not None else None,
            landing=landing,
            cache=self._landing_cache() if landing is not None else None,
            watch=self._watch_batches,
        )

    def _watch_batches(self, run: BatchRun | None) -> None:
        self._batches = run

    def _landing_cache(self) -> Any:
        """The response cache named by batch_cache (opened once), or None without one."""
        if self._landing is None and self.settings.batch_cache:
            from assay.requests.cache import ResponseCache

            self._landing = ResponseCache(self.settings.batch_cache, self.identity())
        return self._landing

    def _batch_provider(self, client: Any, endpoint: str) -> Any:
        """The provider's batch API for requests to `endpoint`, within the batch_max_* args."""
        s, limits = self.settings, self.provider.batch_limits
        return self.provider.batch_provider(
            client,
            redact_url(s.base_url),  # names the batches in messages and journals
            endpoint,
            type(limits)(
                s.batch_max_requests or limits.max_requests, s.batch_max_bytes or limits.max_bytes
            ),
        )

    def _client(self) -> Any:
        """The asynchronous SDK client (built once, by the session)."""
        return self.provider.async_client(self.settings, self._key, self._observe)

    def _sync_client(self) -> Any:
        """The synchronous SDK client of batch calls (built once)."""
        return self._session.sync_client()

    def _new_sync_client(self) -> Any:
        return self.provider.sync_client(self.settings, self._key)

    async def _observe(self, response: Any) -> None:
        """Every HTTP answer: the provider's rate-limit headers go to the pacer."""
        self._pacer.observe(self.provider.signals(response.headers))

    def _status_hint(self, status: int) -> str:
        return self.provider.status_hint(status, self.settings, self.settings.api_key_env)

    def _gather(
        self,
        outcome: CallOutcome[Any],
        owners: list[list[int]],
        combine: Callable[[list[Any]], R],
        what: str,
        hint: str,
    ) -> list[R]:
        server = redact_url(self.settings.base_url)
        return gather(
            outcome,
            owners,
            combine,
            backend=self.name,
            server=server,
            what=what,
            hint=hint,
            spending=active_limit(),
        )

    def _require_key(self) -> None:
        """Refuse, before the first request, to send requests without a key to a server that
        is not on this machine (local servers ignore the key)."""
        s = self.settings
        if self._key.given or is_loopback(s.base_url):
            return
        raise ConfigError(
            f"--model {self.name}: no API key for {redact_url(s.base_url)}: the environment "
            f"variable {s.api_key_env} is not set. Set it (export {s.api_key_env}=...), or name "
            "the variable that holds the key with api_key_env=NAME in --model-args; for a "
            f"server that needs no key, set {s.api_key_env} to any value."
        )

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
