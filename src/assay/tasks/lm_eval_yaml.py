"""lm-eval task YAML -> TaskConfig, rendering prompts exactly as lm-eval 0.4.13 does.

This module reads a YAML's keys into a `TaskConfig` or `GroupConfig`; its templates render in
`lm_eval_templates`'s environment, its rows become docs through `lm_eval_docs.DocBuilder`, and
its metric_list and filter_list become specs in `lm_eval_specs`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.doc import OutputType
from assay.errors import TaskConfigError
from assay.tasks._yaml_io import FunctionRef
from assay.tasks.config import TaskConfig
from assay.tasks.lm_eval_docs import DocBuilder
from assay.tasks.lm_eval_specs import filter_specs, function_or, metric_specs

log = logging.getLogger(__name__)

TASK_KEYS = {
    "task", "task_alias", "tag", "class", "dataset_path", "dataset_name", "dataset_kwargs",
    "custom_dataset", "training_split", "validation_split", "test_split", "fewshot_split",
    "process_docs", "doc_to_text", "doc_to_target", "doc_to_choice", "gen_prefix", "description",
    "target_delimiter", "fewshot_delimiter", "fewshot_config", "num_fewshot", "output_type",
    "generation_kwargs", "repeats", "filter_list", "metric_list", "process_results", "metadata",
    "unsafe_code", "should_decontaminate", "doc_to_decontamination_query", "use_prompt",
    "doc_to_image", "doc_to_audio", "group", "group_alias", "aggregate_metric_list",
}  # fmt: skip
IGNORED_WITH_WARNING = {"should_decontaminate", "doc_to_decontamination_query"}
UNSUPPORTED = {
    "use_prompt": "promptsource prompts need the promptsource package and the network; write doc_to_text/doc_to_target instead",
    "doc_to_audio": "no assay backend takes audio (hf-multimodal, openai-chat and vllm take images); evaluate audio tasks with lm-eval's hf-audiolm, or drop doc_to_audio for a text-only variant",
}
FEWSHOT_KEYS = {
    "sampler", "split", "samples", "fewshot_indices", "process_docs", "doc_to_text",
    "doc_to_choice", "doc_to_target", "gen_prefix", "target_delimiter", "fewshot_delimiter",
}  # fmt: skip


@dataclass
class GroupConfig:
    """An lm-eval group: subtasks plus how their metrics aggregate."""

    name: str
    tasks: list[Any]
    """Subtask names, tags, or {task: name, ...overrides} / inline group mappings."""
    alias: str | None = None
    aggregate_metric_list: list[dict[str, Any]] = field(default_factory=list)
    version: Any = None
    overrides: dict[str, Any] = field(default_factory=dict)
    """Other keys: task settings pushed down to every child."""
    source: str = ""


def resolve_data_files(files: Any, yaml_dir: Path) -> Any:
    """Relative data file paths made relative to `yaml_dir`, the folder of the task file that
    names them (a path that exists only relative to the working directory is kept)."""

    def fix(p: Any) -> Any:
        if isinstance(p, str) and not Path(p).is_absolute() and "://" not in p:
            local = yaml_dir / p
            if local.exists() or not Path(p).exists():
                return str(local)
        return p

    if isinstance(files, dict):
        return {k: [fix(x) for x in v] if isinstance(v, list) else fix(v) for k, v in files.items()}
    if isinstance(files, list):
        return [fix(x) for x in files]
    return fix(files)


def _cluster_key(metadata: dict[str, Any], where: str) -> str | None:
    key = metadata.get("cluster_key")
    if key is not None and (not isinstance(key, str) or not key):
        raise TaskConfigError(
            f"{where}: 'metadata.cluster_key' must name a dataset field (a string), got {key!r}."
        )
    return key


def _judges(metadata: dict[str, Any]) -> dict[str, Any]:
    """The task's own judge models (`metadata: {judge_model: ..., judge_model_args: {...}}`),
    checked with the rest of the config by TaskConfig.validate()."""
    names = ("judge_model", "judge_model_args", "second_judge_model", "second_judge_model_args")
    return {name: metadata[name] for name in names if name in metadata}


def _agent(metadata: dict[str, Any], where: str) -> Any:
    """The task's agent loop (`metadata: {agent: {tools: [...], max_turns: ...}}`), or None."""
    if "agent" not in metadata:
        return None
    from assay.agents.spec import agent_spec_from_yaml

    return agent_spec_from_yaml(metadata["agent"], where)


def _metadata(raw: dict[str, Any], where: str) -> dict[str, Any]:
    metadata = raw.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise TaskConfigError(f"{where}: 'metadata' must be a mapping, got {metadata!r}.")
    return dict(metadata)


def task_config_from_yaml(raw: dict[str, Any], path: Path) -> TaskConfig:
    """Build a TaskConfig from a merged (includes resolved) lm-eval task mapping."""
    from assay.tasks.runtime_guard import loading_task

    where = f"task {raw.get('task')!r} ({path})"  # as TaskConfig.where() gives it
    with loading_task(where, bool(raw.get("unsafe_code", False))):
        return _task_config(raw, path)


def _task_config(raw: dict[str, Any], path: Path) -> TaskConfig:
    where = f"{path}"
    name = raw.get("task")
    if not isinstance(name, str) or not name:
        raise TaskConfigError(f"{where}: 'task' must be the task's name (a non-empty string).")
    where = f"{path} (task {name!r})"
    if "class" in raw:  # lm-eval's Python-class task: its own Task API serves it
        from assay.tasks.lm_eval_class import class_task_config

        return class_task_config(raw, path)
    for key in raw:
        if key in UNSUPPORTED:
            raise TaskConfigError(f"{where}: '{key}' is not supported: {UNSUPPORTED[key]}.")
        if key in IGNORED_WITH_WARNING:
            log.warning("%s: '%s' is ignored (assay does not decontaminate).", where, key)
        elif key not in TASK_KEYS:
            import difflib

            valid = sorted(TASK_KEYS - {"group", "group_alias", "aggregate_metric_list"})
            close = difflib.get_close_matches(str(key), valid, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise TaskConfigError(
                f"{where}: unknown key '{key}'.{hint} Valid keys: {', '.join(valid)}."
            )
    try:
        output_type = OutputType(raw.get("output_type", "generate_until"))
    except ValueError:
        raise TaskConfigError(
            f"{where}: output_type {raw.get('output_type')!r} is not one of {[o.value for o in OutputType]}."
        ) from None
    fewshot = raw.get("fewshot_config") or {}
    if not isinstance(fewshot, dict):
        raise TaskConfigError(f"{where}: 'fewshot_config' must be a mapping.")
    for key in fewshot:
        if key not in FEWSHOT_KEYS:
            raise TaskConfigError(
                f"{where}: unknown fewshot_config key '{key}'. Valid: {', '.join(sorted(FEWSHOT_KEYS))}."
            )
    sampler = fewshot.get("sampler", "default")
    selector = (
        {"default": "lm_eval", "first_n": "first_n"}.get(sampler)
        if isinstance(sampler, str)
        else None
    )
    if selector is None:
        raise TaskConfigError(
            f"{where}: fewshot_config.sampler {sampler!r} is not supported; use 'default' or 'first_n'."
        )
    for key in ("target_delimiter", "fewshot_delimiter", "description"):
        if key in raw and raw[key] is not None and not isinstance(raw[key], str):
            raise TaskConfigError(
                f"{where}: '{key}' must be a string, got {type(raw[key]).__name__}."
            )
    yaml_dir = path.parent
    if not isinstance(raw.get("dataset_kwargs") or {}, dict):
        raise TaskConfigError(
            f"{where}: 'dataset_kwargs' must be a mapping (e.g. data_files: {{test: test.jsonl}}), "
            f"got {type(raw['dataset_kwargs']).__name__}."
        )
    dataset_kwargs = dict(raw.get("dataset_kwargs") or {})
    data_files = dataset_kwargs.pop("data_files", None)
    revision = dataset_kwargs.pop("revision", None)
    test, validation, train = (
        raw.get("test_split"),
        raw.get("validation_split"),
        raw.get("training_split"),
    )
    eval_split = test or validation
    if eval_split is None:
        raise TaskConfigError(
            f"{where}: set 'test_split' or 'validation_split' (the split to evaluate)."
        )
    explicit_fewshot_split = fewshot.get("split") or raw.get("fewshot_split")
    fewshot_split = explicit_fewshot_split or train or validation or test
    generation_kwargs = raw.get("generation_kwargs")
    if generation_kwargs is not None and not isinstance(generation_kwargs, dict):
        raise TaskConfigError(f"{where}: 'generation_kwargs' must be a mapping.")
    repeats = raw.get("repeats", 1)
    if not isinstance(repeats, int) or repeats < 1:
        raise TaskConfigError(f"{where}: 'repeats' must be a positive integer, got {repeats!r}.")
    num_fewshot = raw.get("num_fewshot")
    if num_fewshot is not None and (not isinstance(num_fewshot, int) or num_fewshot < 0):
        raise TaskConfigError(
            f"{where}: 'num_fewshot' must be a non-negative integer, got {num_fewshot!r}."
        )
    metadata = _metadata(raw, where)
    samples = fewshot.get("samples")
    indices = fewshot.get("fewshot_indices")
    custom = raw.get("custom_dataset")
    if custom is not None and not isinstance(custom, FunctionRef):
        raise TaskConfigError(f"{where}: 'custom_dataset' must be a !function.")
    tags = raw.get("tag") or []
    config = TaskConfig(
        name=name,
        prompt_function=DocBuilder(raw, output_type, where, fewshot={}),
        hf_repo=raw.get("dataset_path"),
        hf_subset=raw.get("dataset_name"),
        metrics=metric_specs(raw, output_type, where),
        hf_data_files=resolve_data_files(data_files, yaml_dir) if data_files is not None else None,
        hf_revision=revision,
        evaluation_splits=(eval_split,),
        few_shots_split=fewshot_split if samples is None else None,
        few_shots_select=selector,
        fewshot_drop_equal=explicit_fewshot_split == test,
        num_samples=repeats,
        version=metadata.get("version", "Yaml"),
        num_fewshots=num_fewshot or 0,
        num_fewshots_fixed=num_fewshot == 0,
        instruction_in_query=False,
        output_type=output_type,
        target_delimiter=raw.get("target_delimiter", " "),
        fewshot_delimiter=raw.get("fewshot_delimiter", "\n\n"),
        fewshot_prompt_function=DocBuilder(raw, output_type, where, fewshot=fewshot)
        if any(
            k in fewshot for k in ("doc_to_text", "doc_to_target", "doc_to_choice", "gen_prefix")
        )
        else None,
        fewshot_target_delimiter=fewshot.get("target_delimiter"),
        fewshot_fewshot_delimiter=fewshot.get("fewshot_delimiter"),
        fewshot_samples=function_or(samples),
        generation_kwargs=dict(generation_kwargs) if generation_kwargs is not None else None,
        filters=filter_specs(raw, where),
        process_docs=function_or(raw.get("process_docs")),
        fewshot_process_docs=function_or(fewshot.get("process_docs")),
        process_results=function_or(raw.get("process_results")),
        dataset_loader=custom.resolve() if custom is not None else None,
        dataset_kwargs=dataset_kwargs,
        alias=raw.get("task_alias"),
        tags=[tags] if isinstance(tags, str) else list(tags),
        metadata=metadata,
        cluster_key=_cluster_key(metadata, where),
        **_judges(metadata),
        agent=_agent(metadata, where),
        unsafe_code=bool(raw.get("unsafe_code", False)),
        source=str(path),
        raw_config=raw,
    )
    if config.agent is not None and config.agent.sandboxed:
        config.unsafe_code = True  # its tools run programs: consent and the sandbox's notice
    if not config.unsafe_code:
        from assay.tasks.code_routes import code_route

        # A task whose metrics run programs through code_eval executes model-written code,
        # whatever its YAML says: it needs the consent flag and gets the sandbox's notice.
        config.unsafe_code = code_route(config).route == "code_eval"
        if config.unsafe_code:
            from assay.tasks.runtime_guard import own_files, trust_files

            trust_files(own_files(config))
    if indices is not None:
        config.fewshot_process_docs = _subset(
            indices, config.fewshot_process_docs or config.process_docs
        )
    for fn_key in ("process_docs", "process_results"):
        value = getattr(config, fn_key)
        if value is not None and not callable(value):
            raise TaskConfigError(f"{where}: '{fn_key}' must be a !function, got {value!r}.")
    return config


def _subset(indices: list[int], process: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    def pick(rows: Any) -> list[dict[str, Any]]:
        rows = process(rows) if process else rows
        return [rows[i] for i in indices]

    return pick


def group_config_from_yaml(raw: dict[str, Any], path: Path) -> GroupConfig:
    """Build a GroupConfig from a group YAML mapping."""
    name = raw.get("group")
    if not isinstance(name, str) or not name:
        raise TaskConfigError(f"{path}: 'group' must be the group's name.")
    tasks = raw.get("task")
    if not isinstance(tasks, list) or not tasks:
        raise TaskConfigError(
            f"{path} (group {name!r}): 'task' must be a non-empty list of subtasks."
        )
    aggregate = raw.get("aggregate_metric_list") or []
    if isinstance(aggregate, dict):
        aggregate = [aggregate]
    aggregate = list(aggregate)
    for i, entry in enumerate(aggregate):
        if not isinstance(entry, dict) or "metric" not in entry:
            raise TaskConfigError(
                f"{path} (group {name!r}): aggregate_metric_list[{i}] needs a 'metric'."
            )
        function = function_or(entry.get("aggregation", "mean"))
        if callable(function):
            # lm-eval 0.4.13 accepts the function and then reports the mean anyway; assay calls
            # it, as written: fn(metric values, sizes, weight_by_size) of the leaf tasks.
            log.warning(
                "%s (group %r): aggregate_metric_list[%d] aggregates with %s; lm-eval 0.4.13 "
                "ignores such a function and reports the mean, so its number will differ.",
                path,
                name,
                i,
                getattr(function, "__name__", function),
            )
            aggregate[i] = {**entry, "aggregation": function}
        elif function != "mean":
            raise TaskConfigError(
                f"{path} (group {name!r}): aggregate_metric_list[{i}] aggregation is "
                f"{function!r}; a group aggregates with 'mean' or a !function (as in lm-eval)."
            )
    overrides = {
        k: v
        for k, v in raw.items()
        if k not in {"group", "group_alias", "task", "aggregate_metric_list", "metadata"}
    }
    return GroupConfig(
        name=name,
        tasks=list(tasks),
        alias=raw.get("group_alias"),
        aggregate_metric_list=list(aggregate),
        version=_metadata(raw, f"{path} (group {name!r})").get("version"),
        overrides=overrides,
        source=str(path),
    )
