"""The built-in backends' `--model` names and the modules that register them.

Kept apart from `assay.models` so that `assay run --help` lists every built-in backend from
this one table without importing the backend contract; `assay.models.base` declares each name
lazily from it.
"""

from __future__ import annotations

__all__ = ["BUILTIN_BACKENDS"]

BUILTIN_BACKENDS: dict[str, str] = {
    "hf": "assay.models.hf.model",
    "hf-multimodal": "assay.models.hf.multimodal",
    "openai-completions": "assay.models.api.openai",
    "openai-chat": "assay.models.api.openai",
    "anthropic-chat": "assay.models.api.anthropic_chat",
    "vllm": "assay.models.vllm.model",
    "dummy": "assay.models.dummy",
    "replay": "assay.models.replay",
}
"""`--model` name -> the module whose import registers it."""
