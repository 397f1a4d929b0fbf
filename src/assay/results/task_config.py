"""How results.json records a task's configuration (`configs`, as lm-eval writes it)."""

from __future__ import annotations

from typing import Any

from assay.tasks.task import Task


def config_dump(task: Task) -> dict[str, Any]:
    """A task's entry under results.json `configs`: its YAML as written (functions as
    `!function name`), or the Python TaskConfig's fields in lm-eval's names."""
    cfg = task.config
    if cfg.raw_config is not None:
        dumped = {k: (v.dotted if hasattr(v, "dotted") else v) for k, v in cfg.raw_config.items()}
        dumped = _stringify_functions(dumped)
    else:
        dumped = {
            "task": cfg.name,
            "hf_repo": cfg.hf_repo,
            "hf_subset": cfg.hf_subset,
            "hf_revision": cfg.hf_revision,
            "evaluation_splits": list(cfg.evaluation_splits),
            "few_shots_split": cfg.few_shots_split,
            "few_shots_select": cfg.few_shots_select,
            "output_type": cfg.resolved_output_type.value,
            "metric_list": [{"metric": m.name, **m.kwargs} for m in cfg.metrics],  # type: ignore[union-attr]
            "generation_kwargs": cfg.generation_kwargs,
            "num_fewshot": task.shots,
            "target_delimiter": cfg.target_delimiter,
            "fewshot_delimiter": cfg.fewshot_delimiter,
        }
    dumped.setdefault("metadata", {})
    dumped["metadata"] = {
        **(dumped.get("metadata") or {}),
        **cfg.metadata,  # with the run's --metadata
        "version": cfg.version,
        "config_source": cfg.source,
    }
    return dumped


def _stringify_functions(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stringify_functions(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stringify_functions(v) for v in value]
    if hasattr(value, "dotted"):
        return f"!function {value.dotted}"
    return value
