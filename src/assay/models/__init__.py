"""Model backends: the contract every backend implements (`LM`, in base.py), its registry, the
shared model-args checks, and the backends (hf/, api/, vllm/, dummy, replay), each registered
with @register_model and imported only when a run names it."""

from assay.models.base import (
    LM,
    MODELS,
    ModelFactory,
    ModelProvenance,
    TokenCounter,
    checked_backend,
    cut_at_stops,
    load_model,
    register_model,
)

__all__ = [
    "LM",
    "MODELS",
    "ModelFactory",
    "ModelProvenance",
    "TokenCounter",
    "checked_backend",
    "cut_at_stops",
    "load_model",
    "register_model",
]
