"""assay: evaluate language models on benchmark tasks and user-written evaluation pipelines.

The public API is imported lazily, so `import assay` (and `assay --help`) stays instant.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "evaluate": "assay.evaluator",
    "RunSettings": "assay.settings",
    "TaskConfig": "assay.tasks.config",
    "MetricSpec": "assay.tasks.config",
    "Task": "assay.tasks.task",
    "Registry": "assay.tasks.registry",
    "Doc": "assay.doc",
    "SamplingMethod": "assay.doc",
    "OutputType": "assay.doc",
    "PromptManager": "assay.prompts.manager",
    "Filter": "assay.filters.base",
    "FilterEnsemble": "assay.filters.base",
    "build_filter_ensemble": "assay.filters.base",
    "register_filter": "assay.filters.base",
    "Metric": "assay.metrics.base",
    "SampleInput": "assay.metrics.base",
    "register_metric": "assay.metrics.base",
    "register_aggregation": "assay.metrics.base",
    "LM": "assay.models.base",
    "register_model": "assay.models.base",
    "AssayError": "assay.errors",
    "run_evals": "assay.pipelines.experiment",
    "Experiment": "assay.pipelines.experiment",
    "List": "assay.pipelines.knobs",
    "Range": "assay.pipelines.knobs",
}

__all__ = [*sorted(_EXPORTS), "__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'assay' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
