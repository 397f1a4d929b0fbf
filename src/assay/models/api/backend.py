"""The provider-neutral base of the API backends: settings, client, runner, errors, generation.

`_APIBackend` is what `openai-completions`, `openai-chat` (`openai`) and `anthropic-chat`
(`anthropic_chat`) share. Requests run concurrently, at most `num_concurrent` at once and fewer
while the provider pushes back (`pacing.Pacer`: adaptive concurrency, the provider's retry-after
and rate-limit headers, the optional `rpm`/`tpm` ceilings). A 429 or 529 waits as long as the
provider asks, up to `max_wait` seconds per request; 5xx answers, lost connections and timeouts
are retried `max_retries` times with exponential backoff and jitter. A request that still fails
makes the whole call raise `APIRequestError` naming the failed requests: a task is never scored
on answers that did not arrive. With `batch_api=true` generations go through the provider's
batch API instead (`batches`, `batch_providers`).

Every answer's token usage is counted (`usage_stats`), and priced when the model's prices are
known (`price_in`/`price_out` args or the bundled table, see `usage`); the run's `--max-cost`
(`budget`) stops sending requests before it would be exceeded.

The API key is read from the environment variable named by `api_key_env`; a server that is not
on this machine is refused before the first request when the variable is unset. The key, and
every secret of the model args (URL user info, secret-looking `default_query` and
`default_headers` entries), are remembered by `util.redact`, which hides them from every output.

`GenerationOnly` refuses loglikelihoods for chat endpoints, which return no prompt
log-probabilities.
"""

from __future__ import annotations

import asyncio
import contextvars
import ipaddress
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit

from assay.errors import ConfigError, ModelError
from assay.models.api.arrivals import Arrivals
from assay.models.api.batch_providers import OPENAI_LIMITS, OpenAIBatches
from assay.models.api.batches import (
    FAILED_CHOICES,
    JOURNAL_FOLDER,
    BatchJournal,
    BatchLimits,
    BatchProvider,
    BatchRun,
)
from assay.models.api.budget import CostLimitReached, SpendingLimit, active_limit
from assay.models.api.openai_answers import AnswerReading, read_choice
from assay.models.api.pacing import FailureKind, Limits, Pacer, read_signals
from assay.models.api.payloads import estimated_tokens, extra_fields, message_texts, sampling_fields
from assay.models.api.runner import (
    DEFAULT_MAX_WAIT,
    APIRequestError,
    CallOutcome,
    PermanentFailure,
    RetryPolicy,
    TransientFailure,
    run_calls,
    run_sync,
)
from assay.models.api.usage import Usage, UsageMeter, UsageStats, model_prices, openai_usage
from assay.models.args import REQUIRED, Arg, AutoOrCount, BatchSize
from assay.models.base import LM, ModelProvenance
from assay.models.thinking import thinking_args
from assay.requests.types import (
    GenerateRequest,
    Generation,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RollingRequest,
    RollingResult,
)
from assay.util.redact import clean_text, redact_url, remember, remember_in

log = logging.getLogger(__name__)
R = TypeVar("R")

_CALL: contextvars.ContextVar[int | None] = contextvars.ContextVar("api_call", default=None)
"""The index of the call whose answer is being received (for --max-cost's accounting)."""

_RETRYABLE_STATUS = {408, 409, 429}
BATCH_API_CHUNK = 50_000
"""Requests per executor chunk with batch_api=true (when batch_size is "auto"): OpenAI's
per-batch limit, so a task of that size is submitted at once."""
_OVERLOAD_STATUS = {529}
"""Anthropic's "overloaded": waited out like a 429, without spending the retry budget."""
_SHARED_ARGS: dict[str, Arg] = {
    "model": Arg(str, REQUIRED),
    "base_url": Arg(str, "https://api.openai.com/v1"),
    "api_key_env": Arg(str, "OPENAI_API_KEY"),
    "tokenizer": Arg(str, None, nullable=True),
    "num_concurrent": Arg(int, 4, minimum=1),
    "max_retries": Arg(int, 5, minimum=0),
    "timeout": Arg(float, 300.0, minimum=0.001),
    "rpm": Arg(float, None, nullable=True, minimum=0.001),
    "tpm": Arg(float, None, nullable=True, minimum=1),
    "itpm": Arg(float, None, nullable=True, minimum=1),
    "otpm": Arg(float, None, nullable=True, minimum=1),
    "max_wait": Arg(float, DEFAULT_MAX_WAIT, minimum=0.001),
    "price_in": Arg(float, None, nullable=True, minimum=0),
    "price_out": Arg(float, None, nullable=True, minimum=0),
    "price_cached_in": Arg(float, None, nullable=True, minimum=0),
    "batch_discount": Arg(float, None, nullable=True, minimum=0),
    "seed": Arg(int, 1234, nullable=True),
    "max_stop_sequences": Arg(int, 4, minimum=0),
    "extra_body": Arg(dict, None, nullable=True),
    "default_query": Arg(dict, None, nullable=True),
    "default_headers": Arg(dict, None, nullable=True),
    "batch_size": Arg(AutoOrCount, "auto"),
    "batch_api": Arg(bool, False),
    "batch_poll_interval": Arg(float, 30.0, minimum=0.001),
    "batch_resubmits": Arg(int, 2, minimum=0),
    "batch_failed": Arg(str, "resubmit", choices=FAILED_CHOICES),
    "batch_max_requests": Arg(int, None, nullable=True, minimum=1),
    "batch_max_bytes": Arg(int, None, nullable=True, minimum=1),
    "batch_dir": Arg(str, None, nullable=True),
    "batch_cache": Arg(str, None, nullable=True),
}

_PER_REQUEST_FIELDS = frozenset(
    {
        "model",
        "prompt",
        "messages",
        "echo",
        "logprobs",
        "n",
        "stream",
        "temperature",
        "top_p",
        "seed",
        "stop",
        "max_tokens",
        "max_completion_tokens",
    }
)
"""Body fields every request sets itself: extra_body may not override them."""


@dataclass(frozen=True, slots=True)
class APISettings:
    """The parsed model args of an API backend."""

    model: str
    base_url: str
    api_key_env: str
    """Name of the environment variable holding the key (never the key itself)."""
    tokenizer: str | None
    """HF tokenizer id or path: counts tokens for loglikelihoods, templates and `tpm`."""
    num_concurrent: int
    max_retries: int
    timeout: float
    """Seconds to wait for one answer."""
    rpm: float | None
    """Requests per minute, at most."""
    tpm: float | None
    """Tokens (prompt + max new tokens) per minute, at most."""
    itpm: float | None
    """Prompt tokens per minute, at most (providers that meter input and output apart)."""
    otpm: float | None
    """Requested output tokens (max new tokens) per minute, at most."""
    max_wait: float
    """Seconds one request may keep waiting out 429s and 529s, from its first attempt."""
    price_in: float | None
    """USD per million input tokens (None: the bundled table's, if it lists the model)."""
    price_out: float | None
    """USD per million output tokens."""
    price_cached_in: float | None
    """USD per million cached input tokens."""
    batch_discount: float | None
    """Fraction of the price taken off through the provider's batch API (0.5: half)."""
    seed: int | None
    """Seed sent with every generation whose request has none."""
    max_stop_sequences: int
    extra_body: dict[str, Any] | None
    """Fields added to every request body (e.g. top_k or repetition_penalty for vLLM)."""
    default_query: dict[str, Any] | None
    """Query parameters added to every request URL (Azure's api-version)."""
    batch_size: BatchSize
    """Groups of requests per cache commit ("auto": the executor's default chunk); at most
    num_concurrent calls are in flight whatever it is."""
    max_length: int = 2048
    """Prompt + generated tokens the server accepts (completions: bounds scored spans)."""
    add_bos_token: bool | None = None
    """Completions: whether encoded text starts with BOS; None follows the tokenizer."""
    max_tokens_field: str = "max_tokens"
    """Chat: 'max_tokens', or 'max_completion_tokens' for models that reject it."""
    max_images: int | None = None
    """Chat: images sent per request, at most (the first ones); None sends them all."""
    interleave: bool = True
    """Chat: images where the text says `<image>` (True), or first with the text after."""
    image_detail: str | None = None
    """Chat: OpenAI's `detail` of every image part ("auto", "low", "high"); None omits it."""
    parallel_tool_calls: bool | None = None
    """OpenAI chat: sent as `parallel_tool_calls` with requests that offer tools (False: at
    most one call per answer); None: the server's default."""
    thinking_budget: int | None = None
    """Tokens the model may think before answering (Anthropic: extended thinking; OpenAI: sent
    as `thinking_budget_field`, and a generation that reports more reasoning tokens counts as
    unclosed); None: no budget."""
    batch_api: bool = False
    """Send generations (and completions scoring) through the provider's batch API: answered
    within 24 h at half price, instead of one request at a time."""
    batch_poll_interval: float = 30.0
    """Batch API: seconds between two looks at unfinished batches."""
    batch_resubmits: int = 2
    """Batch API: further submissions of a request that expired, was cancelled or failed
    transiently."""
    batch_failed: str = "resubmit"
    """Batch API: what becomes of requests that a batch of an earlier run left unanswered (it
    failed, expired or was cancelled, or refused them): submitted again, or reported without
    being sent ("stop")."""
    batch_max_requests: int | None = None
    """Batch API: requests per batch, at most (None: the provider's limit)."""
    batch_max_bytes: int | None = None
    """Batch API: bytes of input per batch, at most (None: the provider's limit)."""
    batch_dir: str | None = None
    """Batch API: folder of the journal of submitted batches (the run's output folder's
    `batches/` when run from the CLI)."""
    batch_cache: str | None = None
    """Batch API: the run's response cache, which downloaded answers enter at once."""
    think_end_token: str | None = None
    """OpenAI: the marker that ends inline thinking (`</think>`); with it, stop strings are
    applied to the answer only, never sent to the server."""
    think_start_token: str | None = None
    """OpenAI: the marker that opens inline thinking (see `models.thinking.Thinking`)."""
    thinking_budget_field: str | None = None
    """OpenAI: the request field that carries `thinking_budget` (vLLM's
    `thinking_token_budget`)."""
    reasoning_effort: str | None = None
    """OpenAI: sent as the `reasoning_effort` request field (low, medium, high...)."""
    default_headers: dict[str, Any] | None = None
    """HTTP headers added to every request (a gateway's own key header, ...)."""


class _Key:
    """An API key that never shows itself in a repr or a message (`util.redact` remembers it,
    so no output shows it either)."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None) -> None:
        self._value = value or None
        remember(self._value)

    @property
    def given(self) -> bool:
        """Whether a key was found."""
        return self._value is not None

    def reveal(self) -> str:
        # Local servers ignore the key, but the client insists on one.
        return self._value or "unused"

    def __repr__(self) -> str:
        return "<api key>" if self._value else "<no api key>"


def is_loopback(url: str) -> bool:
    """Whether `url` names a server on this machine (localhost, 127.0.0.0/8, ::1)."""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _APIBackend(LM):
    """What the completions and chat backends share: client, runner, errors, generation."""

    name: ClassVar[str]
    per_request_fields: ClassVar[frozenset[str]] = _PER_REQUEST_FIELDS
    """Body fields every request sets itself: extra_body may not override them."""
    thinking_controls: tuple[str, ...] = ("thinking_budget", "reasoning_effort")

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
        self._reading = AnswerReading(
            thinking_args(
                self.name,
                settings.think_end_token,
                settings.think_start_token,
                settings.thinking_budget if settings.think_end_token else None,
            ),
            settings.thinking_budget,
        )
        """How answers are read: inline thinking markers and the thinking budget."""
        doubled = sorted(set(self._reasoning_fields()) & set(settings.extra_body or {}))
        if doubled:
            raise ConfigError(
                f"--model {self.name}: extra_body sets {', '.join(doubled)}, which the model arg "
                "of that name sets too; give it once."
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
        self._key = _Key(os.environ.get(settings.api_key_env))
        limits = Limits(settings.rpm, settings.tpm, settings.itpm, settings.otpm)
        self._pacer = Pacer(settings.num_concurrent, limits)
        self._meter = UsageMeter(
            model_prices(
                settings.model,
                settings.price_in,
                settings.price_out,
                settings.price_cached_in,
                settings.batch_discount,
            )
        )
        self._estimates: dict[int, float] = {}
        """Calls admitted under --max-cost and not settled yet: their estimated USD."""
        self._tokenizer: Any = None
        self._batches: BatchRun | None = None
        """The batch run being waited for (batch API only)."""
        self._landing: Any = None
        """The response cache that batch answers enter as they download, once opened."""
        if settings.batch_api and not (settings.batch_dir or settings.batch_cache):
            raise ConfigError(
                f"--model {self.name}: batch_api=true needs a folder to record submitted "
                "batches in, so that a re-run never pays for them twice: give --output-dir or "
                "--cache to assay run, or batch_dir=<folder> in the model args."
            )

    # -- the LM protocol -------------------------------------------------------------------

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str | Generation]:
        """Generated text per request, cut at the request's stop strings."""
        requests = list(requests)
        calls, owners = _dedupe(requests)
        prompts = [self._prompt(r) for r in calls]

        def answer(j: int, response: Any) -> str | Generation:
            return self._answer(response, calls[j], prompts[j])

        if self.settings.batch_api:
            outcome = self._run_batch(
                len(calls),
                self.endpoint,
                lambda j: self._create_args(prompts[j], calls[j]),
                answer,
                landing=calls,
            )
        else:
            arrivals = self._arrivals()

            def cost(j: int) -> tuple[float, float]:
                return self._count_tokens(prompts[j]), calls[j].params.max_gen_toks

            async def generate(client: Any, j: int) -> str | Generation:
                result = answer(
                    j, await self._create(client, self._create_args(prompts[j], calls[j]))
                )
                if arrivals is not None:
                    arrivals.add(self._request_key(calls[j]), result)
                return result

            outcome = self._run(len(calls), generate, cost, arrivals)
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
        run = self._batches
        if run is not None:
            line = run.status_line
            return clean_text(line) if line else line
        return (
            self._pacer.status()
            if self._meter.totals()["requests"] or self._pacer.in_flight
            else None
        )

    def usage_stats(self) -> UsageStats:
        """Running totals: requests answered, attempts repeated, 429/529 answers, tokens by
        kind and their cost in USD (None when a price is unknown), with the prices used."""
        return self._meter.totals()

    # -- what the endpoints do differently --------------------------------------------------

    endpoint: ClassVar[str]
    """The path of the generation endpoint, as batch inputs name it (/v1/chat/completions)."""

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
        and the batch paths both return. OpenAI's endpoints read it with `read_choice`."""
        if not response.choices:
            raise PermanentFailure("the server answered with no choices")
        opened = (
            isinstance(prompt, str)
            and self._reading.thinking is not None
            and self._reading.thinking.opened_by(prompt)
        )
        return read_choice(response, request.params.until, self._reading, opened=opened)

    def _response(self, body: dict[str, Any]) -> Any:
        """A batch result's JSON body as the SDK's typed answer (what `_create` returns)."""
        raise NotImplementedError

    def _usage(self, usage: Any) -> Usage:
        """An answer's `usage` field (object or dict) as the meter counts it."""
        return openai_usage(usage)

    def _generation_defaults(self) -> dict[str, Any]:
        s = self.settings
        defaults = {
            "seed": s.seed,
            "max_stop_sequences": s.max_stop_sequences,
            "extra_body": s.extra_body or {},
        }
        # Reasoning settings only when given, so that caches of other runs keep their keys.
        reasoning = ("think_end_token", "think_start_token", "thinking_budget", "reasoning_effort")
        defaults.update({k: getattr(s, k) for k in reasoning if getattr(s, k) is not None})
        defaults.update(self._reasoning_fields())
        return defaults

    def _reasoning_fields(self) -> dict[str, Any]:
        """Request fields that steer a reasoning model's thinking (from the model args)."""
        s = self.settings
        fields: dict[str, Any] = {}
        if s.reasoning_effort is not None:
            fields["reasoning_effort"] = s.reasoning_effort
        if s.thinking_budget is not None and s.thinking_budget_field:
            fields[s.thinking_budget_field] = s.thinking_budget
        return fields

    # -- shared machinery -------------------------------------------------------------------

    has_batch_api = True

    def _run_batch(
        self,
        n_calls: int,
        endpoint: str,
        create_args: Callable[[int], dict[str, Any]],
        answer: Callable[[int, Any], R],
        landing: Sequence[GenerateRequest] | None = None,
    ) -> CallOutcome[R]:
        """`answer(j, response)` for every call j, sent through the provider's batch API.

        `create_args(j)` is call j's SDK arguments (as for `_create`). With `landing` (call j
        answers request `landing[j]`), answers enter the response cache as each batch
        downloads, before the whole chunk is done.
        """
        outcome: CallOutcome[R] = CallOutcome([None] * n_calls)
        if n_calls == 0:
            return outcome
        self._require_key()
        cache = self._landing_cache() if landing is not None else None

        def deliver(arrived: dict[int, dict[str, Any]]) -> None:
            # Each answer once (calls sharing a body share it), at the batch price.
            for body in {id(b): b for b in arrived.values()}.values():
                self._meter.record(self._usage(body.get("usage")), batch=True)
            landed: list[tuple[str, Any]] = []
            for j, body in arrived.items():
                try:
                    outcome.answers[j] = answer(j, self._response(body))
                except ValueError as exc:  # pydantic's ValidationError included
                    outcome.failures[j] = f"the batch answer is malformed: {exc}"
                except PermanentFailure as exc:
                    outcome.failures[j] = exc.reason
                else:
                    if landing is not None:
                        landed.append((self._request_key(landing[j]), outcome.answers[j]))
            if cache is not None and landed:
                cache.put_many(landed)

        s = self.settings
        folders = [Path(s.batch_dir)] if s.batch_dir else []
        if s.batch_cache:
            folders.append(Path(s.batch_cache).parent / JOURNAL_FOLDER)
        self._batches = BatchRun(
            self._batch_provider(self._sync_client(), endpoint),
            BatchJournal(folders),
            poll_interval=s.batch_poll_interval,
            resubmits=s.batch_resubmits,
            on_failed="stop" if s.batch_failed == "stop" else "resubmit",
        )
        try:
            failures = self._batches.run(n_calls, lambda j: flat_body(create_args(j)), deliver)
        finally:
            self._batches = None
        outcome.failures.update(failures)
        return outcome

    def _batch_limits(self, default: BatchLimits) -> BatchLimits:
        s = self.settings
        return BatchLimits(
            s.batch_max_requests or default.max_requests, s.batch_max_bytes or default.max_bytes
        )

    @staticmethod
    def _arrivals() -> Arrivals | None:
        """Where online answers are filed as they arrive: the cache of the executor's chunk."""
        from assay.requests.cache import receiver

        cache = receiver()
        return Arrivals(cache) if cache is not None else None

    def _landing_cache(self) -> Any:
        """The response cache named by batch_cache (opened once), or None without one."""
        if self._landing is None and self.settings.batch_cache:
            from assay.requests.cache import ResponseCache

            self._landing = ResponseCache(self.settings.batch_cache, self.identity())
        return self._landing

    @staticmethod
    def _request_key(request: GenerateRequest) -> str:
        from assay.requests.cache import request_key

        return request_key(request)

    def _generation_fields(self, request: GenerateRequest, max_tokens_field: str) -> dict[str, Any]:
        """Body fields of one generation besides the model and the prompt."""
        if request.params.as_given:
            # Exactly the user's fields (response_format, max_completion_tokens, ...): the
            # server's defaults stand for everything else.
            return {"extra_body": {**self._body_defaults(), **dict(request.params.extra)}}
        return {max_tokens_field: request.params.max_gen_toks, **self._request_fields(request)}

    def _body_defaults(self) -> dict[str, Any]:
        """Fields added to every generation body: the reasoning fields and `extra_body`."""
        return {**self._reasoning_fields(), **(self.settings.extra_body or {})}

    def _request_fields(self, request: GenerateRequest) -> dict[str, Any]:
        s = self.settings
        # With inline thinking, a stop string the server applied could cut the thinking
        # short ("\n\n", "Question:"): stop strings then apply to the answer only, here.
        stops = 0 if self._reading.thinking is not None else s.max_stop_sequences
        fields = sampling_fields(request, s.seed, stops)
        extra = extra_fields(request, self._body_defaults())
        if extra:
            fields["extra_body"] = extra
        return fields

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

    def _sdk(self) -> Any:
        """The official client package this backend speaks through."""
        try:
            import openai
        except ImportError:
            raise ModelError(
                f"--model {self.name} needs the openai package; install assay[api]."
            ) from None
        return openai

    def _client(self) -> Any:
        sdk = self._sdk()
        return sdk.AsyncOpenAI(
            api_key=self._key.reveal(),
            base_url=self.settings.base_url,
            default_query=self.settings.default_query,
            default_headers=self.settings.default_headers,
            max_retries=0,
            timeout=self.settings.timeout,
            http_client=sdk.DefaultAsyncHttpxClient(event_hooks={"response": [self._observe]}),
        )

    def _sync_client(self) -> Any:
        """A synchronous SDK client (batch calls), retrying with the SDK's own backoff."""
        return self._sdk().OpenAI(
            api_key=self._key.reveal(),
            base_url=self.settings.base_url,
            default_query=self.settings.default_query,
            default_headers=self.settings.default_headers,
            max_retries=self.settings.max_retries,
            timeout=self.settings.timeout,
        )

    def _batch_provider(self, client: Any, endpoint: str) -> BatchProvider:
        """The provider's batch API, for requests to `endpoint`."""
        return OpenAIBatches(
            client,
            self._sdk(),
            redact_url(self.settings.base_url),  # names the batches in messages and journals
            endpoint,
            clean_text,
            self._batch_limits(OPENAI_LIMITS),
        )

    def _run(
        self,
        n_calls: int,
        call: Callable[[Any, int], Awaitable[R]],
        tokens: Callable[[int], tuple[float, float]],
        arrivals: Arrivals | None = None,
    ) -> CallOutcome[R]:
        """Run `call(client, j)` for every j with this backend's concurrency, limits and retries.

        `tokens(j)` is call j's (prompt tokens, requested output tokens), for token rate limits.
        `arrivals`, which `call` files its answers in, is committed every window meanwhile and
        once more at the end, whatever ends the run (an interrupt included).
        """
        if n_calls == 0:
            return CallOutcome([])
        self._require_key()
        s = self.settings
        policy = RetryPolicy(max_retries=s.max_retries, max_wait=s.max_wait)
        spending = active_limit()
        if spending is not None and self._meter.prices is None:
            raise ConfigError(
                f"--max-cost needs the prices of --model {self.name} model={s.model!r}, which "
                "the bundled price table does not list: give price_in= and price_out= (USD per "
                "million tokens) in --model-args."
            )

        async def attempt(client: Any, j: int) -> R:
            _CALL.set(j)
            return await self._classified(call(client, j))

        async def run() -> CallOutcome[R]:
            flushing = asyncio.create_task(arrivals.keep_flushing()) if arrivals else None
            try:
                async with self._client() as client:
                    return await run_calls(
                        n_calls,
                        lambda j: attempt(client, j),
                        pacer=self._pacer,
                        retry=policy,
                        cost=tokens,
                        admit=self._admission(spending, tokens) if spending else None,
                    )
            finally:
                if flushing is not None:
                    flushing.cancel()

        try:
            outcome = run_sync(run)
        finally:
            if arrivals is not None:
                arrivals.flush()
            if spending is not None:  # calls that never got an answer cost nothing
                for estimate in self._estimates.values():
                    spending.settle(estimate, 0.0)
                self._estimates.clear()
        self._meter.count_attempts(outcome.retries, outcome.rate_limited)
        if outcome.retries:
            log.info(
                "%s: %d attempt(s) repeated, %d of them after a 429/529",
                self.name,
                outcome.retries,
                outcome.rate_limited,
            )
        return outcome

    def _admission(
        self, spending: SpendingLimit, tokens: Callable[[int], tuple[float, float]]
    ) -> Callable[[int], bool]:
        """`admit` for run_calls under --max-cost: each call is estimated at the dearest answer
        so far, or before any, at its prompt and max new tokens at the model's prices."""
        prices = self._meter.prices
        assert prices is not None

        def admit(j: int) -> bool:
            estimate = self._meter.most_per_request
            if not estimate:
                prompt, output = tokens(j)
                estimate = (prompt * prices.input + output * prices.output) / 1e6
            if not spending.admit(estimate):
                return False
            self._estimates[j] = estimate
            return True

        return admit

    async def _observe(self, response: Any) -> None:
        """Every HTTP answer: the provider's rate-limit headers go to the pacer; a successful
        answer's token usage to the meter (and its cost to the run's --max-cost)."""
        self._pacer.observe(read_signals(response.headers))
        if not response.is_success:
            return
        await response.aread()
        try:
            usage = response.json().get("usage")
        except ValueError:
            usage = None
        read = self._usage(usage)
        cost = self._meter.record(read)
        spending, j = active_limit(), _CALL.get()
        if spending is not None and j is not None and j in self._estimates:
            unknown = (
                "the server's answers report no token usage"
                if read.input_tokens is None or read.output_tokens is None
                else "the price of some of the tokens an answer used is unknown (cached input "
                "tokens without price_cached_in=)"
            )
            spending.settle(self._estimates.pop(j), cost, unknown)

    async def _classified(self, pending: Awaitable[R]) -> R:
        """Await one API call, turning client errors into transient or permanent failures."""
        sdk = self._sdk()
        try:
            return await pending
        except sdk.APITimeoutError:
            raise TransientFailure(
                f"no answer within {self.settings.timeout:g} s", kind="timeout"
            ) from None
        except sdk.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            raise TransientFailure(
                clean_text(f"connection failed: {type(cause).__name__}: {cause}")
            ) from None
        except sdk.APIStatusError as exc:
            status = exc.status_code
            reason = clean_text(f"HTTP {status}: {_server_message(exc)}")
            if status in _RETRYABLE_STATUS or status >= 500:
                signals = read_signals(exc.response.headers)
                kind: FailureKind = "error"
                if status == 429:
                    kind = "rate_limited"
                elif status in _OVERLOAD_STATUS:
                    kind = "overloaded"
                raise TransientFailure(
                    reason, signals.retry_after, kind=kind, signals=signals
                ) from None
            raise PermanentFailure(reason + self._status_hint(status)) from None

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

    def _status_hint(self, status: int) -> str:
        s = self.settings
        if status in (401, 403):
            return (
                f" (the server refused the credentials: put the API key in ${s.api_key_env}, "
                "or name another variable with api_key_env=)"
            )
        if status == 404:
            return (
                f" (check base_url={redact_url(s.base_url)!r}, which usually ends in /v1, and "
                f"model={s.model!r})"
            )
        return ""

    def _gather(
        self,
        outcome: CallOutcome[Any],
        owners: list[list[int]],
        combine: Callable[[list[Any]], R],
        what: str,
        hint: str,
    ) -> list[R]:
        """Per request, `combine` of its calls' answers; an APIRequestError if any is missing
        (CostLimitReached when --max-cost kept them from being sent)."""
        spending = active_limit()
        if spending is not None and spending.unknown:
            self._refuse_unknown_cost(spending, outcome, owners, combine, what)
        if outcome.ok:
            return [combine([outcome.answers[j] for j in calls]) for calls in owners]
        abandoned = set(outcome.abandoned) | set(outcome.unsent)
        failures: dict[int, str] = {}
        missing: list[int] = []
        partial: list[Any] = []
        for i, calls in enumerate(owners):
            reasons = [outcome.failures[j] for j in calls if j in outcome.failures]
            if reasons:
                failures[i] = reasons[0]
            elif any(j in abandoned for j in calls):
                missing.append(i)
            complete = not reasons and not any(j in abandoned for j in calls)
            partial.append(combine([outcome.answers[j] for j in calls]) if complete else None)
        if not failures and outcome.unsent and spending is not None:
            raise CostLimitReached(
                f"--max-cost {spending.max_usd:g} USD reached: this invocation's API requests "
                f"cost {spending.spent:.6f} USD, and {len(missing)} of {len(owners)} "
                f"{what} request(s) of --model {self.name} were not sent (each was estimated "
                "at the dearest answer so far, before any at its prompt and max new "
                "tokens). The answers that arrived are in the response cache: re-run with a "
                "larger --max-cost to continue from there.",
                partial,
            )
        summary = (
            f"--model {self.name}: {len(failures)} of {len(owners)} {what} request(s) to "
            f"{redact_url(self.settings.base_url)} failed"
        )
        raise APIRequestError(summary, failures, missing, partial, hint)

    def _refuse_unknown_cost(
        self,
        spending: SpendingLimit,
        outcome: CallOutcome[Any],
        owners: list[list[int]],
        combine: Callable[[list[Any]], Any],
        what: str,
    ) -> None:
        """Stop the run under --max-cost once an answer's cost is unknown: the budget cannot
        be kept. The answers that arrived are kept (CostLimitReached's `partial`)."""
        lost = set(outcome.failures) | set(outcome.abandoned) | set(outcome.unsent)
        partial = [
            combine([outcome.answers[j] for j in calls])
            if not any(j in lost for j in calls)
            else None
            for calls in owners
        ]
        unsent = sum(1 for p in partial if p is None)
        raise CostLimitReached(
            f"--max-cost {spending.max_usd:g} USD cannot be kept: {spending.unknown}, so what "
            f"the requests of --model {self.name} cost is unknown; the run stopped "
            f"({unsent} of {len(owners)} {what} request(s) not answered). Re-run without "
            "--max-cost to go on without a budget, or use a server that reports usage. The "
            "answers that arrived are in the response cache.",
            partial,
        )


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


def flat_body(args: dict[str, Any]) -> dict[str, Any]:
    """An SDK call's keyword arguments as the JSON body it sends (`extra_body` merged in)."""
    body = {k: v for k, v in args.items() if k != "extra_body"}
    body.update(args.get("extra_body") or {})
    return body


def _dedupe(requests: list[GenerateRequest]) -> tuple[list[GenerateRequest], list[list[int]]]:
    """Distinct requests, and for each input request the index of its distinct twin."""
    index: dict[GenerateRequest, int] = {}
    for r in requests:
        index.setdefault(r, len(index))
    return list(index), [[index[r]] for r in requests]


def _server_message(exc: Any) -> str:
    """The human part of an API error body, shortened."""
    body = getattr(exc, "body", None)
    message = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") or inner.get("detail") if isinstance(inner, dict) else inner
        message = message or body.get("detail")
    text = str(message if message else getattr(exc, "message", exc))
    return text if len(text) <= 300 else text[:297] + "..."
