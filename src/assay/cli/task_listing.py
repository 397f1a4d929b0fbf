"""`assay tasks list / show / dump`: what the registry holds, without loading any model; `show`
builds a task's requests through the plan `assay run` follows (`run.plan.plan_task`)."""

from __future__ import annotations

import inspect
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from assay.errors import AssayError, ConfigError
from assay.requests.tools import conversation_record
from assay.results.samples import target_of
from assay.tasks.config import TaskConfig
from assay.tasks.data_at_hand import data_at_hand
from assay.tasks.lm_eval_yaml import GroupConfig
from assay.tasks.registry import Registry
from assay.tasks.task import Task, fewshot_count

if TYPE_CHECKING:
    from assay.requests.plan import Capabilities

log = logging.getLogger(__name__)


def _family(config: TaskConfig) -> str:
    module = sys.modules.get(getattr(config.prompt_function, "__module__", "") or "")
    name = getattr(module, "__name__", "") if module else ""
    if name.startswith("assay.catalog."):
        return name.rsplit(".", 1)[-1]
    return "yaml" if config.raw_config is not None else "custom"


def list_table(registry: Registry, pattern: str | None = None) -> str:
    """One line per task, group and tag (name, kind, family, output type or members, default
    shots): tasks first, then groups, then tags. `pattern` keeps the names containing it
    (case-insensitive)."""
    wanted = (pattern or "").lower()
    python = registry.python_configs()
    yaml_entries = registry.yaml_entries()
    by_kind: dict[str, list[tuple[str, ...]]] = {"task": [], "group": [], "tag": []}
    for name in registry.names():
        if wanted not in name.lower():
            continue
        kind = registry.kind(name) or "task"
        if kind == "task" and name in python:
            config = python[name]
            data = (
                data_at_hand(config.hf_repo, config.hf_data_files)
                if config.dataset_loader is None
                else ""
            )
            row = (name, kind, _family(config), config.resolved_output_type.value,
                   str(config.num_fewshots), data)  # fmt: skip
        elif kind == "task":
            # The index knows a YAML's output_type, shots and data without building the task
            # (lm-eval's defaults, generate_until and 0 shots, when the YAML does not say).
            entry = yaml_entries.get(name)
            output_type = (entry.output_type if entry else None) or "generate_until"
            shots = str(entry.num_fewshot or 0) if entry else ""
            row = (name, kind, "yaml", output_type, shots, entry.data if entry else "")
        else:
            row = (name, kind, "", _count(len(registry.members(name)), "task"), "", "")
        by_kind[kind].append(row)
    rows: list[tuple[str, ...]] = [
        ("name", "kind", "family", "output type / members", "shots", "data offline")
    ]
    rows += [row for kind in ("task", "group", "tag") for row in by_kind[kind]]
    if len(rows) == 1:
        return f"no task, group or tag name contains {pattern!r}" if pattern else "no tasks"
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    table = "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
    return table + "\n\n" + DATA_LEGEND


DATA_LEGEND = (
    "data offline: local = data files here; cached = a copy in the Hugging Face cache (some "
    "subset or split of it); hub = downloaded on first run; missing = a named data file is "
    "not there; blank = the task loads its data its own way."
)


@dataclass(frozen=True)
class ShowSettings:
    """The run settings `tasks show` previews a prompt with (those of `assay run`)."""

    num_fewshot: int | None = None
    apply_chat_template: bool = False
    system_instruction: str | None = None
    fewshot_as_multiturn: bool | None = None
    tokenizer: str | None = None
    """The tokenizer whose chat template renders the prompt (--model-args tokenizer=...)."""


def _named(registry: Registry, name: str) -> tuple[TaskConfig | GroupConfig, int | None]:
    """The task or group `name` means, and the shots its task string gives: a task string
    (`gsm8k|5`, `suite|task|3`) or a name only another harness defines resolves as `assay run
    --tasks` resolves it, to one task."""
    if "|" not in name and registry.kind(name) is not None:
        return registry.get(name), None
    if "|" not in name and name.endswith((".yaml", ".yml")):
        return registry.get(name), None
    tasks = registry.resolve([name]).tasks
    if len(tasks) != 1:
        raise ConfigError(
            f"tasks show {name!r}: it names {len(tasks)} tasks "
            f"({', '.join(t.config.name for t in tasks[:5])}{' ...' if len(tasks) > 5 else ''}); "
            "show one of them."
        )
    return tasks[0].config, tasks[0].num_fewshot


def show(registry: Registry, name: str, settings: ShowSettings | None = None) -> str:
    """A task's settings and its first doc's requests, built as a run builds them (prompt
    settings and generation settings included), so what is shown is what the model gets.

    The doc comes from the task's real data when it is at hand (local files, or the hub cache:
    nothing is downloaded for a task that bundles example rows); otherwise from the bundled
    example rows, and the output says so.
    """
    from assay.requests.build import build_requests
    from assay.requests.plan import Capabilities
    from assay.run.plan import check_task, plan_task
    from assay.run.settings import RunSettings

    s = settings or ShowSettings()
    found, num_fewshot = _named(registry, name)
    if isinstance(found, GroupConfig):
        return f"group {found.name}: {', '.join(map(str, found.tasks))}"
    if s.apply_chat_template and not s.tokenizer:
        raise ConfigError(
            "tasks show --apply-chat-template renders with a tokenizer's chat template: add "
            "--model-args tokenizer=<directory or hub id> (or pretrained=...)."
        )
    if s.fewshot_as_multiturn and not s.apply_chat_template:
        raise ConfigError("--fewshot-as-multiturn needs --apply-chat-template.")
    config, origin = _data_for_show(found)
    # Showing a task runs none of its model-written code, so unsafe tasks may be shown.
    scorers = check_task(config, confirm_run_unsafe_code=True)
    task = Task(config, num_fewshot=fewshot_count(config, num_fewshot, s.num_fewshot))
    lines = [
        f"task: {config.name}",
        f"source: {config.source}",
        f"output type: {task.output_type.value}",
        f"shots: {task.shots}",
        f"metrics: {', '.join(m.name for m in config.metrics)}",  # type: ignore[union-attr]
        "filters:",
        *(f"  {f.name}: {' -> '.join(f.description) or '(none)'}" for f in scorers.filters),
        f"doc 0: {origin}",
    ]
    _, doc = next(task.docs([0]))
    target = target_of(doc, task.output_type)
    if task.output_type.value == "multiple_choice" and isinstance(doc.gold_index, int):
        target += f" (choice {doc.choices[doc.gold_index]!r})"
    lines += [_rule("target (what the metrics compare with)"), target]
    capabilities = _tokenizer_capabilities(s.tokenizer) if s.tokenizer else Capabilities()
    # The plan `assay run` follows with these flags (and its default --gen-kwargs and --seed).
    run = RunSettings(
        num_fewshot=s.num_fewshot,
        apply_chat_template=s.apply_chat_template,
        system_instruction=s.system_instruction,
        fewshot_as_multiturn=s.fewshot_as_multiturn,
    )
    plan = plan_task(task, scorers, run, capabilities).requests
    # No model counts tokens here: the prompt keeps all its few-shot examples.
    context = None
    for inst in build_requests(replace(plan, truncate_fewshots=False), doc, capabilities):
        lines += _readable(inst.index, inst.request, context)
        context = getattr(inst.request, "context", None)
    return "\n".join(lines)


def _rule(title: str) -> str:
    return f"── {title} " + "─" * max(3, 76 - len(title))


def _readable(index: int, request: Any, previous_context: str | None = None) -> list[str]:
    """One request as a person reads it: its texts with their real line breaks, each part
    under a rule; a continuation in repr() so its spaces and newlines show. A context equal
    to the previous request's (a question's choices) is not printed again."""
    from assay.requests.types import LoglikelihoodRequest, RollingRequest

    if isinstance(request, RollingRequest):
        return [_rule(f"request {index}: text scored"), request.text]
    if isinstance(request, LoglikelihoodRequest):
        continuation = f"request {index}: continuation scored: {request.continuation!r}"
        if request.context == previous_context:
            return [continuation]
        return [_rule(f"request {index}: context"), request.context, continuation]
    if isinstance(request.prompt, str):
        lines = [_rule(f"request {index}: prompt"), request.prompt]
    else:
        lines = []
        messages = conversation_record(request.prompt)
        assert not isinstance(messages, str)
        for message in messages:
            lines += [_rule(f"request {index}: {message['role']}"), str(message["content"])]
    for tool in request.tools:
        lines += [_rule(f"request {index}: tool"), json.dumps(tool.as_dict(), ensure_ascii=False)]
    settings = json.dumps(request.params.as_dict(), ensure_ascii=False)
    return [*lines, _rule(f"request {index}: generation settings"), settings]


def _data_for_show(config: TaskConfig) -> tuple[TaskConfig, str]:
    """The config to show a doc of, and where that doc comes from."""
    if not config.example_rows:
        return config, "the task's dataset"
    try:
        with _cache_only():
            Task(config).load()
    except AssayError as exc:
        log.info("tasks show %s: the dataset is not at hand (%s)", config.name, exc)
        return _offline_copy(config), (
            "a bundled EXAMPLE row (the dataset is not in the local cache: this shows the prompt "
            "format, not a real question)"
        )
    return config, "the task's dataset"


@contextmanager
def _cache_only() -> Iterator[None]:
    """Hub datasets from the local cache only: showing a prompt downloads nothing."""
    import os

    names = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    saved = {n: os.environ.get(n) for n in names}
    os.environ.update(dict.fromkeys(names, "1"))
    patched = []
    # The libraries read the variables when imported; patch them when they already are.
    for module, attr in (("huggingface_hub.constants", "HF_HUB_OFFLINE"),
                         ("datasets.config", "HF_HUB_OFFLINE"),
                         ("datasets.config", "HF_DATASETS_OFFLINE")):  # fmt: skip
        loaded = sys.modules.get(module)
        if loaded is not None and hasattr(loaded, attr):
            patched.append((loaded, attr, getattr(loaded, attr)))
            setattr(loaded, attr, True)
    try:
        yield
    finally:
        for loaded, attr, value in patched:
            setattr(loaded, attr, value)
        for n, value in saved.items():
            if value is None:
                os.environ.pop(n, None)
            else:
                os.environ[n] = value


def _tokenizer_capabilities(name: str) -> Capabilities:
    """What `tasks show` knows of a model without loading it: its tokenizer's chat template."""
    from assay.prompts.chat import TokenizerChatTemplate
    from assay.requests.plan import Capabilities

    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"--model-args tokenizer={name}: cannot load this tokenizer ({exc}). Give a "
            "local directory or a hub id in the local cache."
        ) from None
    template = TokenizerChatTemplate(
        tokenizer, missing=f"--model-args tokenizer={name}: this tokenizer has no chat template."
    )
    return Capabilities(backend=f"tokenizer {name}", chat_template=template)


def _offline_copy(config: TaskConfig) -> TaskConfig:
    rows = list(config.example_rows or [])
    split = config.evaluation_splits[0]
    splits = {split: rows}
    if config.few_shots_split and config.few_shots_split != split:
        splits[config.few_shots_split] = rows
    # The bundled rows stand for every split: drawn from the evaluated split's name, the few-shot
    # examples leave out the doc itself, as lm-eval does when the two splits are one.
    return replace(
        config,
        few_shots_split=split if config.few_shots_split else None,
        dataset_loader=lambda **_: splits,
        hf_repo=None,
        hf_filter=None,
        process_docs=config.process_docs,
    )


def dump(registry: Registry, errors: list[str] | None = None) -> str:
    """JSON: each task module (or lm-eval YAML file) with its docstring and task configs.

    YAML tasks from --include-path are dumped too, with their config as lm-eval resolves it
    (includes merged), as results.json records it. A YAML that does not load is dumped as
    `{"name", "error"}` and the dump goes on; the messages are appended to `errors`.
    """
    from assay.results.task_config import config_dump

    modules: dict[str, dict[str, Any]] = {}
    for name, config in sorted(registry.python_configs().items()):
        module_name = getattr(config.prompt_function, "__module__", "") or config.source
        module = sys.modules.get(module_name)
        docstring = inspect.getdoc(module) if module else None
        _module_entry(modules, module_name, docstring).append(_task_entry(name, config))
    failed = errors if errors is not None else []
    for folder in registry.folder_indexes():
        for path, error in folder.broken.items():
            _module_entry(modules, path, None).append({"name": None, "error": error})
            failed.append(error)
    for name, index_entry in sorted(registry.yaml_entries().items()):
        if index_entry.kind != "task" or index_entry.file is None:
            continue
        try:
            found = registry.get(name)
            assert isinstance(found, TaskConfig)
            config = found
            entry = {**_task_entry(name, config), "config": config_dump(Task(config))}
        except (Exception, SystemExit) as exc:  # one broken task must not hide the others
            message = str(exc) if isinstance(exc, AssayError) else f"{type(exc).__name__}: {exc}"
            entry = {"name": name, "error": message}
            failed.append(message)
        _module_entry(modules, index_entry.file, None).append(entry)
    return json.dumps(list(modules.values()), indent=2, default=str)


def _module_entry(
    modules: dict[str, dict[str, Any]], name: str, docstring: str | None
) -> list[dict[str, Any]]:
    """The task list of module (or YAML file) `name` in a dump, created on first use."""
    entry = modules.setdefault(name, {"module": name, "docstring": docstring, "tasks": []})
    return entry["tasks"]


def _task_entry(name: str, config: TaskConfig) -> dict[str, Any]:
    return {
        "name": name,
        "hf_repo": config.hf_repo,
        "hf_subset": config.hf_subset,
        "hf_revision": config.hf_revision,
        "evaluation_splits": list(config.evaluation_splits),
        "few_shots_split": config.few_shots_split,
        "num_fewshots": config.num_fewshots,
        "output_type": config.resolved_output_type.value,
        "metrics": [m.name for m in config.metrics],  # type: ignore[union-attr]
        "generation_kwargs": config.generation_kwargs,
        "version": config.version,
    }


def _count(n: int, noun: str) -> str:
    """ "1 task", "2 tasks"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
