"""Task specs to docs: TaskConfig, Task, the lm-eval YAML loader, few-shot samplers, registry.

Names are imported on first use (the registry indexes YAML folders and the catalog imports
every built-in family; neither is needed to read a TaskConfig).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from assay.tasks.config import MetricSpec, TaskConfig
    from assay.tasks.lm_eval_yaml import GroupConfig
    from assay.tasks.registry import Registry, Resolved, TaskRequest
    from assay.tasks.task import Task

_EXPORTS = {
    "GroupConfig": "assay.tasks.lm_eval_yaml",
    "MetricSpec": "assay.tasks.config",
    "Registry": "assay.tasks.registry",
    "Resolved": "assay.tasks.registry",
    "Task": "assay.tasks.task",
    "TaskConfig": "assay.tasks.config",
    "TaskRequest": "assay.tasks.registry",
}

__all__ = ["GroupConfig", "MetricSpec", "Registry", "Resolved", "Task", "TaskConfig", "TaskRequest"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'assay.tasks' has no attribute {name!r}")
    return getattr(import_module(module), name)
