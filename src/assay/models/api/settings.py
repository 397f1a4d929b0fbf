"""The model args every API backend takes (`SHARED_ARGS`) and their parsed form (`APISettings`).

Provider-neutral: each provider's backends give `base_url` and `api_key_env` their defaults
and add the args of their own endpoints; `APISettings` holds them all, defaults standing for
the args a backend does not take.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from assay.errors import ConfigError
from assay.models.api.batches import FAILED_CHOICES
from assay.models.api.runner import DEFAULT_MAX_WAIT
from assay.models.args import REQUIRED, Arg, AutoOrCount, BatchSize

SHARED_ARGS: dict[str, Arg] = {
    "model": Arg(str, REQUIRED),
    "base_url": Arg(str, REQUIRED),  # each provider's backend gives its own default
    "api_key_env": Arg(str, REQUIRED),
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

PER_REQUEST_FIELDS = frozenset(
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


BATCH_API_CHUNK = 50_000
"""Requests per executor chunk with batch_api=true (when batch_size is "auto"): OpenAI's
per-batch limit, so a task of that size is submitted at once."""


def check_settings(backend: str, settings: APISettings, per_request_fields: frozenset[str]) -> None:
    """Refuse model args that contradict each other or what every request sets itself
    (`per_request_fields`), naming `backend`."""
    overridden = sorted(per_request_fields & set(settings.extra_body or {}))
    if overridden:
        raise ConfigError(
            f"--model {backend}: extra_body sets {', '.join(overridden)}, which every request "
            "sets itself; put sampling settings in --gen-kwargs or the task's "
            "generation_kwargs instead."
        )
    if settings.batch_discount is not None and settings.batch_discount > 1:
        raise ConfigError(
            f"--model {backend}: batch_discount={settings.batch_discount:g} is the fraction "
            "of the price taken off through a batch API, between 0 and 1 (0.5: half price)."
        )
    if settings.batch_api and not (settings.batch_dir or settings.batch_cache):
        raise ConfigError(
            f"--model {backend}: batch_api=true needs a folder to record submitted "
            "batches in, so that a re-run never pays for them twice: give --output-dir or "
            "--cache to assay run, or batch_dir=<folder> in the model args."
        )


def chunk_size(settings: APISettings) -> BatchSize:
    """Requests per executor chunk: the batch_size arg, or with batch_api=true and no whole
    number given, a provider batch's worth (one chunk, hence one set of batches submitted
    together: chunks of the online default would wait in turn)."""
    if settings.batch_api and not isinstance(settings.batch_size, int):
        return BATCH_API_CHUNK
    return settings.batch_size
