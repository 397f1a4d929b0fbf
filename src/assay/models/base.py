"""The LM protocol every backend implements, and the backend registry."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from assay.registry import Registry
from assay.requests import (
    GenerateRequest,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RollingRequest,
    RollingResult,
)


@runtime_checkable
class LM(Protocol):
    """A language model backend.

    Each method takes a list of requests and returns one result per request, in the same order.
    Backends may reorder internally (length-sorted batches) but must restore the order.
    """

    def loglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        """log P(continuation | context) and greediness, per request."""
        ...

    def loglikelihood_rolling(self, requests: Sequence[RollingRequest]) -> list[RollingResult]:
        """Total log P(text) over rolling windows, per request."""
        ...

    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str]:
        """Generated text per request, cut at the first stop string."""
        ...

    def identity(self) -> dict[str, Any]:
        """Everything that changes this model's outputs (backend, weights, revision, dtype, ...).

        The response cache keys on it, so two models never share cached answers. Secrets (API
        keys) must never appear here.
        """
        ...


class ModelFactory(Protocol):
    """Builds a backend from parsed --model-args (plus run-level settings)."""

    def __call__(self, **model_args: Any) -> LM: ...


MODELS: Registry[ModelFactory] = Registry("model")
register_model = MODELS.register

# Built-in backends register themselves when imported; listing them imports nothing heavy.
for _name, _module in {
    "dummy": "assay.models.dummy",
    "replay": "assay.models.replay",
    "hf": "assay.models.huggingface",
    "openai-completions": "assay.models.openai",
    "openai-chat": "assay.models.openai",
    "vllm": "assay.models.vllm",
}.items():
    MODELS.lazy(_name, _module)


def chat_template_of(model: LM) -> Any:
    """The backend's `apply_chat_template(messages, add_generation_prompt)` or None."""
    return getattr(model, "apply_chat_template", None)


def cut_at_stops(text: str, until: Sequence[str]) -> str:
    """Cut generated text before the first occurrence of each stop string, as lm-eval does.

    Every backend applies stop strings through this one function.
    """
    for stop in until:
        if stop:
            text = text.split(stop, 1)[0]
    return text
