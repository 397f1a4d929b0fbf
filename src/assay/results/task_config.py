"""How results.json records a task's configuration (`configs`), in lm-eval's schema.

lm-eval writes `TaskConfig.to_dict()`: its fields in declaration order, defaults filled in
(`description`, delimiters, `fewshot_config`, `repeats`, ...), None values left out, and the
generation kwargs with the run's `--gen_kwargs` merged. assay writes the same for an lm-eval
YAML (its values as written, functions as `!function name`) and maps a Python TaskConfig's
fields onto the same keys (functions as `module.name`), so every task's entry reads alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assay.doc import OutputType
from assay.requests.types import lm_eval_gen_kwargs, merge_gen_kwargs, set_max_gen_toks
from assay.tasks.task import Task

LM_EVAL_FIELDS = (
    "task", "task_alias", "tag", "custom_dataset", "dataset_path", "dataset_name",
    "dataset_kwargs", "training_split", "validation_split", "test_split", "fewshot_split",
    "process_docs", "doc_to_text", "doc_to_target", "doc_to_image", "doc_to_audio", "unsafe_code",
    "doc_to_choice", "process_results", "use_prompt", "description", "target_delimiter",
    "fewshot_delimiter", "fewshot_config", "num_fewshot", "metric_list", "output_type",
    "generation_kwargs", "repeats", "filter_list", "should_decontaminate",
    "doc_to_decontamination_query", "gen_prefix", "metadata",
)  # fmt: skip
"""lm-eval 0.4.13's TaskConfig fields, in the order its results.json lists them."""

_DEFAULTS = {
    "unsafe_code": False,
    "description": "",
    "target_delimiter": " ",
    "fewshot_delimiter": "\n\n",
    "output_type": "generate_until",
    "repeats": 1,
    "should_decontaminate": False,
}

_DEFAULT_FILTERS: tuple[Any, ...] = (("none", [("take_first", {})]),)


def config_dump(task: Task, gen_kwargs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A task's entry under results.json `configs` (lm-eval's TaskConfig.to_dict()), with the
    run's `gen_kwargs` (--gen-kwargs) merged into a generative task's generation_kwargs."""
    cfg = task.config
    values = _from_yaml(task) if cfg.raw_config is not None else _from_python(task)
    for key, default in _DEFAULTS.items():
        values.setdefault(key, default)
    values["num_fewshot"] = task.shots
    values["fewshot_config"] = _fewshot_config(values)
    if cfg.resolved_output_type == OutputType.GENERATE_UNTIL or "generation_kwargs" in values:
        task_kwargs = values.get("generation_kwargs")
        kwargs = lm_eval_gen_kwargs(task_kwargs, values["fewshot_delimiter"])
        values["generation_kwargs"] = merge_gen_kwargs(kwargs, gen_kwargs or {})
    values["metadata"] = {
        **(values.get("metadata") or {}),
        **cfg.metadata,  # with the run's --metadata
        "version": cfg.version,
        "config_source": cfg.source,
    }
    ordered = {k: values[k] for k in LM_EVAL_FIELDS if values.get(k) is not None}
    # Keys lm-eval does not know (assay extensions) follow its own.
    ordered.update({k: v for k, v in values.items() if k not in ordered and v is not None})
    return ordered


def _from_yaml(task: Task) -> dict[str, Any]:
    raw = task.config.raw_config or {}
    return _stringify_functions(
        {k: (v.dotted if hasattr(v, "dotted") else v) for k, v in raw.items()}
    )


def _from_python(task: Task) -> dict[str, Any]:
    """A Python TaskConfig under lm-eval's names."""
    cfg = task.config
    dataset_kwargs = {
        **cfg.dataset_kwargs,
        **({"data_files": cfg.hf_data_files} if cfg.hf_data_files is not None else {}),
        **({"revision": cfg.hf_revision} if cfg.hf_revision is not None else {}),
    }
    splits = list(cfg.evaluation_splits)
    filters = None
    if tuple(cfg.filters) != _DEFAULT_FILTERS:
        filters = [
            {
                "name": name,
                # A function among a step's arguments is recorded by name: its repr holds an
                # address, which would make the task's hash differ from process to process.
                "filter": [
                    {"function": _name(fn), **{k: _name(v) for k, v in kwargs.items()}}
                    for fn, kwargs in steps
                ],
            }
            for name, steps in cfg.filters
        ]
    return {
        "task": cfg.name,
        "task_alias": cfg.alias,
        "tag": list(cfg.tags) or None,
        "custom_dataset": _name(cfg.dataset_loader),
        "dataset_path": cfg.hf_repo,
        "dataset_name": cfg.hf_subset,
        "dataset_kwargs": dataset_kwargs or None,
        "test_split": splits[0] if len(splits) == 1 else splits,
        "fewshot_split": cfg.few_shots_split,
        "process_docs": _name(cfg.process_docs),
        "doc_to_text": _name(cfg.prompt_function),
        "unsafe_code": cfg.unsafe_code,
        "process_results": _name(cfg.process_results),
        "target_delimiter": cfg.target_delimiter,
        "fewshot_delimiter": cfg.fewshot_delimiter,
        "fewshot_config": {
            "sampler": cfg.few_shots_select,
            "doc_to_text": _name(cfg.fewshot_prompt_function),
            "process_docs": _name(cfg.fewshot_process_docs),
            "samples": None if cfg.fewshot_samples is None else _name(cfg.fewshot_samples),
        },
        "metric_list": [
            {
                "metric": m.name,  # type: ignore[union-attr]
                **m.kwargs,  # type: ignore[union-attr]
                **({"aggregation": _name(m.aggregation)} if m.aggregation else {}),  # type: ignore[union-attr]
            }
            for m in cfg.metrics
        ],
        "output_type": cfg.resolved_output_type.value,
        "generation_kwargs": _python_gen_kwargs(task),
        "repeats": cfg.num_samples or 1,
        "filter_list": filters,
        "gen_prefix": _name(cfg.gen_prefix),
        "metadata": dict(cfg.metadata),
    }


def _python_gen_kwargs(task: Task) -> dict[str, Any] | None:
    """A Python task's generation settings as a run applies them: its generation_size
    and stop_sequence (every doc's defaults) over lm-eval's generation_kwargs."""
    cfg = task.config
    if cfg.resolved_output_type != OutputType.GENERATE_UNTIL:
        return cfg.generation_kwargs
    kwargs = lm_eval_gen_kwargs(cfg.generation_kwargs, cfg.fewshot_delimiter)
    if cfg.generation_size is not None:
        set_max_gen_toks(kwargs, cfg.generation_size)
    if cfg.stop_sequence is not None:
        kwargs["until"] = list(cfg.stop_sequence)
    return kwargs


def _fewshot_config(values: dict[str, Any]) -> dict[str, Any]:
    """lm-eval's FewshotConfig.from_dict: the task's settings, overridden by its fewshot_config."""
    given = {k: v for k, v in (values.get("fewshot_config") or {}).items() if v is not None}
    merged = {
        "sampler": "default",
        "split": values.get("fewshot_split"),
        "process_docs": values.get("process_docs"),
        "fewshot_indices": None,
        "samples": None,
        "doc_to_text": values.get("doc_to_text"),
        "doc_to_choice": values.get("doc_to_choice"),
        "doc_to_target": values.get("doc_to_target"),
        "gen_prefix": values.get("gen_prefix"),
        "fewshot_delimiter": values["fewshot_delimiter"],
        "target_delimiter": values["target_delimiter"],
    }
    merged.update(given)
    return merged


def _name(value: Any) -> Any:
    """A function as `module.name` (a string or other value as it is)."""
    if value is None or isinstance(value, str) or not callable(value):
        return value
    module = getattr(value, "__module__", None)
    name = getattr(value, "__qualname__", None) or type(value).__name__
    return f"{module}.{name}" if module else name


def _stringify_functions(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stringify_functions(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stringify_functions(v) for v in value]
    if hasattr(value, "dotted"):
        return f"!function {value.dotted}"
    return value
