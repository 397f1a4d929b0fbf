"""assay: evaluate language models on benchmark tasks and user-written evaluation pipelines.

The public API is imported lazily, so `import assay` (and `assay --help`) stays instant; the
`TYPE_CHECKING` block below gives type checkers and IDEs the real types of every name.

RapidFire's knob types `List` and `Range` live in `assay.pipelines` (a top-level `List` would
shadow `typing.List` in `from assay import *`).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from assay.doc import Doc, OutputType, SamplingMethod
    from assay.errors import AssayError
    from assay.filters.base import Filter, FilterEnsemble, build_filter_ensemble, register_filter
    from assay.metrics.base import Metric, SampleInput, register_aggregation, register_metric
    from assay.models.base import LM, register_model
    from assay.pipelines.experiment import Experiment, run_evals
    from assay.prompts.manager import PromptManager
    from assay.results.compare import CompareOptions, compare
    from assay.run.api import evaluate
    from assay.run.settings import RunSettings
    from assay.tasks.config import MetricSpec, TaskConfig
    from assay.tasks.registry import Registry
    from assay.tasks.task import Task

__version__ = "0.1.0"

_EXPORTS = {
    "evaluate": "assay.run.api",
    "compare": "assay.results.compare",
    "CompareOptions": "assay.results.compare",
    "RunSettings": "assay.run.settings",
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
}

_ELSEWHERE = {
    "List": "assay.pipelines",
    "Range": "assay.pipelines",
    "ComponentRegistry": "assay.registry",
}
"""Names people look for at the top level that live in a subpackage."""

__all__ = [  # noqa: RUF022 -- the names of _EXPORTS, sorted, then the version
    "AssayError",
    "CompareOptions",
    "Doc",
    "Experiment",
    "Filter",
    "FilterEnsemble",
    "LM",
    "Metric",
    "MetricSpec",
    "OutputType",
    "PromptManager",
    "Registry",
    "RunSettings",
    "SampleInput",
    "SamplingMethod",
    "Task",
    "TaskConfig",
    "build_filter_ensemble",
    "compare",
    "evaluate",
    "register_aggregation",
    "register_filter",
    "register_metric",
    "register_model",
    "run_evals",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        where = _ELSEWHERE.get(name)
        hint = f"; import it from {where}: from {where} import {name}" if where else ""
        raise AttributeError(f"module 'assay' has no attribute {name!r}{hint}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
