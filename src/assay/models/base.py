"""The backend contract (`LM`) and the backend registry.

A backend is a subclass of `LM`. It must answer the three request kinds and say what it is
(`identity`); everything else it may offer is declared here with its default, so the harness
never probes a backend for optional members and a backend author learns the whole contract
from this one class:

| member              | default | what the harness does with it                                   |
|---------------------|---------|-----------------------------------------------------------------|
| `accepts_messages`  | False   | True: chat prompts are sent as messages (chat APIs)             |
| `accepts_images`    | False   | True: requests may carry doc images (`Request.images`)          |
| `accepts_tools`     | False   | True: generate requests may offer tools (`GenerateRequest.tools`) |
| `max_length`        | None    | context window in tokens; `truncate_fewshots` needs it          |
| `batch_size`        | None    | a whole number: results are committed to the cache batch by batch |
| `batch_sizes`       | []      | sizes chosen by batch_size=auto, reported in results.json       |
| `chat_template()`   | None    | renders `--apply-chat-template` prompts (see `prompts.chat`)    |
| `token_counter()`   | None    | counts prompt tokens (token statistics, `truncate_fewshots`)    |
| `provenance()`      | backend | what results files record about the model                       |
| `live_status()`     | None    | a fragment shown on the live progress line (an API's pacing)    |
| `usage_stats()`     | None    | API requests, tokens and cost so far; results.json per task/run |
| `has_batch_api`     | False   | True: `--batch-api` may send requests through a provider batch API |
| `spends`            | False   | True: built with `spending=`, the run's `--max-cost` limit      |
| `close()`           | nothing | releases clients and threads of a backend the run built, at its end |
| `replica_plan()`    | None    | model args asking for several replicas: run on the Ray executor |
| `unloaded()`        | None    | identity, capabilities, provenance before any weight loads      |

`generate_until` answers each request with a string or a `Generation` (the answer plus its
thinking, finish reason and token counts), and may mix the two.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

from assay.backend_names import BUILTIN_BACKENDS
from assay.errors import ConfigError, ModelError
from assay.models.args import BatchSize
from assay.prompts.chat import ChatTemplate
from assay.registry import ComponentRegistry
from assay.requests.types import (
    FinishReason,
    GenerateRequest,
    Generation,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RollingRequest,
    RollingResult,
)

TokenCounter = Callable[[Sequence[str]], list[int]]
"""Tokens of each text, as the backend encodes a prompt."""


class ModelProvenance(TypedDict, total=False):
    """What a results file records about the model that produced it (all keys optional:
    a backend fills in what it knows)."""

    backend: str
    """The --model name (hf, vllm, openai-completions, ...)."""
    model: str
    """Model id or local path."""
    revision: str | None
    """Requested hub branch, tag or commit."""
    sha: str | None
    """Hub commit the weights were loaded from."""
    dtype: str | None
    """Weight dtype (float32, bfloat16, ...)."""
    num_parameters: int | None
    tokenizer: str | None
    """Tokenizer id or path."""
    chat_template_sha256: str | None
    """sha256 of the tokenizer's chat template source (None without one)."""
    max_length: int | None
    """Context window in tokens."""
    add_bos_token: bool | None
    """Whether prompts start with BOS (None: the tokenizer's default)."""


@dataclass(frozen=True, slots=True)
class ReplicaPlan:
    """Model replicas a backend's own arguments ask for (vLLM's `data_parallel_size`).

    The harness runs them on its one replica engine, the Ray executor (`execution.ray`): each
    replica is the backend built from `replica_args`, on `gpus_per_replica` GPUs of a cluster
    that has GPUs (none of one without, e.g. vLLM's CPU build).
    """

    replicas: int
    gpus_per_replica: float
    replica_args: dict[str, Any]
    """The model args of one replica: the user's, asking for a single one."""
    asked_by: str
    """The model arg that asked, as the user wrote it ("data_parallel_size=4"), for messages."""


class LM(ABC):
    """A language model backend.

    Each request method takes a list of requests and returns one result per request, in the same
    order; a backend may reorder internally (length-sorted batches) but must restore the order.
    The other members are optional capabilities with their defaults (see the module docstring);
    a backend overrides the ones it has.
    """

    accepts_messages: bool = False
    """True when `generate_until` takes chat prompts as messages (a chat API): with
    --apply-chat-template the conversation is sent as is, and the server applies its template."""

    accepts_images: bool = False
    """True when loglikelihood and generate_until honour `request.images` (placed where the
    prompt says `<image>`, see `assay.images`); docs with images are refused otherwise."""

    accepts_tools: bool = False
    """True when `generate_until` honours `request.tools` and `request.tool_choice` (and takes
    a `requests.tools.Conversation` as the prompt), answering with `Generation.tool_calls`;
    requests that offer tools are refused otherwise."""

    thinking_controls: tuple[str, ...] = ()
    """Model args that make the model think less (request fields the server honours), which
    the truncation warning advises when thinking ran out of tokens; empty where none does."""

    max_length: int | None = None
    """Context window in tokens (prompt + generation), when the backend knows it."""

    has_batch_api: bool = False
    """True when the backend can send its requests through a provider's batch API (the
    `batch_api` model arg, which `--batch-api` sets); --batch-api is refused otherwise."""

    spends: bool = False
    """True when the backend is built with `spending=` (a `models.api.budget.SpendingLimit`,
    made by the run from --max-cost and shared with its judges) and admits each request under
    it; --max-cost leaves other backends alone."""

    batch_size: BatchSize | None = None
    """Requests per call as the user set it: a whole number makes the executor commit results
    batch by batch; "auto" or None leaves chunking to the executor."""

    @abstractmethod
    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        """log P(continuation | context) and greediness, per request."""

    @abstractmethod
    def loglikelihood_rolling(self, requests: Sequence[RollingRequest]) -> list[RollingResult]:
        """Total log P(text) over rolling windows, per request."""

    @abstractmethod
    def generate_until(self, requests: Sequence[GenerateRequest]) -> Sequence[str | Generation]:
        """Generated text per request, cut at the first stop string (see `cut_at_stops`).

        A plain string is the answer. A `Generation` also says how the generation ended
        (finish reason), what the model thought (the thinking kept apart from the answer,
        whether it closed) and token counts; results files then report truncation rates.
        """

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """Everything that changes this model's outputs (backend, weights, revision, dtype, ...).

        The response cache keys on it, so two models never share cached answers. Secrets (API
        keys) must never appear here.
        """

    @property
    def batch_sizes(self) -> list[int]:
        """Batch sizes chosen by batch_size=auto so far, in the order chosen (lm-eval's
        `lm.batch_sizes`); backends only ever append. Default: none."""
        return []

    def chat_template(self) -> ChatTemplate | None:
        """The renderer of this model's chat template, or None when it has none (the default).

        Backends with a transformers tokenizer return `prompts.chat.TokenizerChatTemplate`, so
        every backend renders the same prompt. Must be cheap and must not raise: a missing
        template is reported when a prompt is rendered.
        """
        return None

    def token_counter(self) -> TokenCounter | None:
        """A function counting prompt tokens as this backend encodes them, or None when it
        cannot count (the default: statistics are then in characters)."""
        return None

    def scoring_choice(self) -> dict[str, Any] | None:
        """How the backend chose to score loglikelihoods and what it measured to choose (the
        `hf` backend's choice between one context pass per doc and one row per choice), or
        None when it chose nothing (the default). Reported per task in results.json."""
        return None

    def prefix_cache_stats(self) -> dict[str, int] | None:
        """Running totals of the backend's prefix reuse (its own counters, e.g. tokens queried
        and hit), or None when it keeps none (the default). Each task's difference is reported
        in results.json beside its request counts; `queries` and `hits` give a hit rate."""
        return None

    def live_status(self) -> str | None:
        """A short fragment for the live progress line (an API's pacing: "waiting 12 s, rate
        limited"), or None when there is nothing to say (the default). Read at every refresh,
        from another thread: keep it cheap and do not block."""
        return None

    def close(self) -> None:
        """Release what the backend holds open (clients, their threads); a later request may
        open them again. The run calls it on the backends it built once it is done with them.
        Default: nothing."""
        return None

    def usage_stats(self) -> dict[str, int | float | str | None] | None:
        """Running totals of a paid API's usage, or None for a backend that keeps none (the
        default): `requests`, `retries`, `rate_limited`, `input_tokens`, `output_tokens`,
        `cached_input_tokens`, `reasoning_tokens` and `cost_usd` (None when a price is unknown),
        as `assay.models.api.usage.UsageMeter` keeps them. Each task's difference is reported
        in results.json beside its request counts, and their sum for the run."""
        return None

    @classmethod
    def replica_plan(cls, model_args: Mapping[str, Any]) -> ReplicaPlan | None:
        """The replicas `model_args` ask for, read before any is built, or None for one model in
        this process (the default). A backend that returns a plan is never built with the
        asking args itself: the executor factory starts the plan's replicas instead."""
        return None

    @classmethod
    def unloaded(cls, model_args: Mapping[str, Any]) -> LM | None:
        """The backend `model_args` build, known without loading its weights, or None when it
        cannot be known without building it (the default: the run then builds it first).

        Either an `Unloaded` stand-in (identity, capabilities and provenance exactly those of
        the built backend, read from the arguments and light files such as a config or a
        tokenizer; the run builds the backend only for a request its response cache cannot
        answer), or the built backend itself where building it loads nothing heavy (dummy,
        replay, the API clients). The run reads the model identity from it before any weight
        loads: an output folder written by another model is refused first.
        """
        return None

    def provenance(self) -> ModelProvenance:
        """What results files record about the model. Default: the backend name only."""
        backend = self.identity().get("backend")
        return {"backend": str(backend) if backend else type(self).__name__}


class Unloaded(LM):
    """A backend known without its weights (what `LM.unloaded` returns for a backend that has
    some): its identity, capabilities and provenance are the built backend's, and it answers no
    request, since answering needs the weights; the run builds the backend for that."""

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        raise self._not_loaded()

    def loglikelihood_rolling(self, requests: Sequence[RollingRequest]) -> list[RollingResult]:
        raise self._not_loaded()

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str | Generation]:
        raise self._not_loaded()

    def _not_loaded(self) -> ModelError:
        return ModelError(
            f"{type(self).__name__} holds no weights: build the backend to answer requests."
        )


class ModelFactory(Protocol):
    """Builds a backend from parsed --model-args (plus run-level settings)."""

    def __call__(self, **model_args: Any) -> LM: ...


MODELS: ComponentRegistry[ModelFactory] = ComponentRegistry("model", "assay.models")
register_model = MODELS.register

# Built-in backends register themselves when imported; listing them imports nothing heavy.
for _name, _module in BUILTIN_BACKENDS.items():
    MODELS.lazy(_name, _module)


def load_model(name: str, model_args: Mapping[str, Any]) -> LM:
    """The backend registered as `name`, built from its model arguments."""
    return checked_backend(MODELS.get(name)(**model_args), f"--model {name}")


REQUIRED_MEMBERS = ("loglikelihood", "loglikelihood_rolling", "generate_until", "identity")
"""What any object must have to serve as a backend: the three request methods and identity."""


class BackendLike(Protocol):
    """What `evaluate()` accepts as a model object besides an `LM` subclass: the three request
    methods and `identity`, with `LM`'s signatures. Optional capabilities it defines are used;
    the others take `LM`'s defaults."""

    def loglikelihood(
        self, requests: Sequence[LoglikelihoodRequest]
    ) -> Sequence[LoglikelihoodResult]: ...

    def loglikelihood_rolling(
        self, requests: Sequence[RollingRequest]
    ) -> Sequence[RollingResult]: ...

    def generate_until(self, requests: Sequence[GenerateRequest]) -> Sequence[str | Generation]: ...

    def identity(self) -> dict[str, Any]: ...


def checked_backend(model: object, where: str) -> LM:
    """`model` as an `LM`: itself when it subclasses `LM`, wrapped when it has every required
    member without subclassing it (a duck-typed backend); a ConfigError naming `where` and the
    missing members otherwise."""
    if isinstance(model, LM):
        return model
    missing = [name for name in REQUIRED_MEMBERS if not callable(getattr(model, name, None))]
    if not missing:
        return _StructuralBackend(model)
    raise ConfigError(
        f"{where}: {type(model).__name__} is not a model backend: it lacks "
        f"{', '.join(missing)}. A backend has the methods {', '.join(REQUIRED_MEMBERS)} "
        "(subclass assay.LM for the optional capabilities' defaults; the contract is in "
        "assay/models/base.py, and docs/extending.md shows a backend)."
    )


class _StructuralBackend(LM):
    """An object with `LM`'s required members that does not subclass it.

    The required members are the object's own; each optional capability (the module
    docstring's table) is the object's where it defines one, else `LM`'s default, so the
    harness sees the whole contract.
    """

    def __init__(self, model: Any) -> None:
        self._model = model
        for name, default in vars(LM).items():
            optional = not name.startswith("_") and name not in REQUIRED_MEMBERS
            if optional and not isinstance(default, property) and hasattr(model, name):
                setattr(self, name, getattr(model, name))

    @property
    def batch_sizes(self) -> list[int]:
        return list(getattr(self._model, "batch_sizes", []))

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        return list(self._model.loglikelihood(requests))

    def loglikelihood_rolling(self, requests: Sequence[RollingRequest]) -> list[RollingResult]:
        return list(self._model.loglikelihood_rolling(requests))

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str | Generation]:
        return list(self._model.generate_until(requests))

    def identity(self) -> dict[str, Any]:
        return dict(self._model.identity())

    def provenance(self) -> ModelProvenance:
        backend = self.identity().get("backend")
        return {"backend": str(backend) if backend else type(self._model).__name__}


def cut_at_stops(text: str, until: Sequence[str]) -> str:
    """Cut generated text before the first occurrence of each stop string, as lm-eval does.

    Every backend applies stop strings through this one function.
    """
    for stop in until:
        if stop:
            text = text.split(stop, 1)[0]
    return text


def stop_cut_reason(finish: FinishReason | None, uncut: str, answer: str) -> FinishReason | None:
    """The finish reason of an `answer` cut from `uncut` by `cut_at_stops`: "stop_sequence"
    when a stop string cut it here (the answer had ended before whatever stopped the
    generation), else `finish` as the backend gave it."""
    return "stop_sequence" if answer != uncut else finish
