"""Registry: finds tasks by name in the built-in catalog, custom task files and YAML include paths.

Include paths are indexed as lm-eval indexes them (`assay.tasks.index`: every YAML parsed, the
result cached per folder), so a task, group or tag name means what it means to lm-eval. A YAML
file is turned into a TaskConfig only when its task is used. A name defined both by an include
path and by assay's built-ins is served by the include path, and a log line says which file.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import pkgutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from assay.errors import TaskConfigError, UnknownNameError
from assay.tasks import lighteval_suites
from assay.tasks._yaml_io import Memo, load_with_includes_memo, refuse_code_outside
from assay.tasks.config import TaskConfig
from assay.tasks.index import FolderIndex, IndexEntry, build_folder_index
from assay.tasks.lighteval_files import (
    config_from_lighteval,
    convert_table,
    is_lighteval_config,
    missing_lighteval,
)
from assay.tasks.lm_eval_yaml import (
    GroupConfig,
    group_config_from_yaml,
    resolve_data_files,
    task_config_from_yaml,
)

log = logging.getLogger(__name__)


@dataclass
class TaskRequest:
    """One task to run, with the shots asked for in its task string (`name|k`)."""

    config: TaskConfig
    num_fewshot: int | None = None


@dataclass
class GroupNode:
    """A group in the run: its children (task or group names) and aggregate metrics."""

    config: GroupConfig
    children: list[str] = field(default_factory=list)


@dataclass
class Resolved:
    """What a list of task strings resolves to: leaf tasks in run order plus group structure."""

    tasks: list[TaskRequest] = field(default_factory=list)
    groups: list[GroupNode] = field(default_factory=list)


def _catalog_modules() -> list[str]:
    from assay.tasks import catalog

    return sorted(
        m.name for m in pkgutil.iter_modules(catalog.__path__) if not m.name.startswith("_")
    )


class Registry:
    """All tasks a run can name."""

    def __init__(
        self,
        include_paths: Sequence[str | Path] = (),
        custom_tasks: Sequence[str | Path] = (),
        *,
        builtins: bool = True,
    ) -> None:
        self.include_paths = [_include_path(p) for p in include_paths]
        self._builtins = builtins
        self._custom_files = [Path(p) for p in custom_tasks]
        self._python: dict[str, TaskConfig] | None = None
        self._python_groups: dict[str, GroupConfig] = {}
        self._python_tags: dict[str, list[str]] = {}
        self._folders: list[FolderIndex] | None = None
        self._yaml_index: dict[str, IndexEntry] | None = None
        self._origin: dict[str, Path] = {}
        self._parsed: dict[Path, dict[str, Any]] = {}
        self._includes = Memo()
        self._configs: dict[Path, TaskConfig] = {}
        self._announced: set[str] = set()
        self._lighteval: lighteval_suites.Builtins | None = None
        self._custom_lighteval: dict[str, Any] = {}
        """The custom files' LightevalTaskConfigs by name (before conversion)."""

    # --------------------------------------------------------------- sources
    def _python_tasks(self) -> dict[str, TaskConfig]:
        if self._python is None:
            self._python = {}
            modules = []
            if self._builtins:
                modules += [
                    importlib.import_module(f"assay.tasks.catalog.{m}") for m in _catalog_modules()
                ]
                modules += _plugin_modules()
            custom = [_import_file(p) for p in self._custom_files]
            modules += custom
            builtin: set[str] = set()
            for module in modules:
                table = getattr(module, "TASKS_TABLE", None)
                if table is None:
                    raise TaskConfigError(
                        f"{module.__file__}: a task module must define TASKS_TABLE, a list of TaskConfig."
                    )
                if module in custom:
                    self._custom_lighteval.update(
                        (c.name, c) for c in table if is_lighteval_config(c)
                    )
                    table = convert_table(table, module.__file__ or module.__name__)
                for config in table:
                    if not isinstance(config, TaskConfig):
                        raise TaskConfigError(
                            f"{module.__file__}: TASKS_TABLE holds {type(config).__name__}, not TaskConfig."
                        )
                    config.source = config.source or (module.__file__ or module.__name__)
                    if module in custom and config.hf_data_files is not None:
                        # As a YAML's data_files: relative to the file that names them.
                        folder = Path(module.__file__ or ".").parent
                        config.hf_data_files = resolve_data_files(config.hf_data_files, folder)
                    earlier = self._python.get(config.name)
                    if earlier is not None and module in custom and earlier.name in builtin:
                        _announce_custom(config.name, config.source, "task")
                    elif earlier is not None:
                        log.info(
                            "task %s: %s replaces %s", config.name, config.source, earlier.source
                        )
                    self._python[config.name] = config
                    for tag in config.tags:
                        self._python_tags.setdefault(tag, []).append(config.name)
                for group in getattr(module, "GROUPS", []):
                    if module in custom and group.name in self._python_groups:
                        _announce_custom(group.name, group.source or module.__file__, "group")
                    self._python_groups[group.name] = group
                if module not in custom:
                    builtin.update(c.name for c in table)
        return self._python

    def folder_indexes(self) -> list[FolderIndex]:
        """The index of each include path, in the order given."""
        if self._folders is None:
            self._folders = [build_folder_index(root) for root in self.include_paths]
        return self._folders

    def _yaml(self) -> dict[str, IndexEntry]:
        """The include paths' names; a later include path overrides an earlier one (as lm-eval)."""
        if self._yaml_index is None:
            self._yaml_index = {}
            for folder in self.folder_indexes():
                for name, entry in folder.entries.items():
                    self._yaml_index[name] = entry
                    self._origin[name] = folder.root
        return self._yaml_index

    def _raw(self, path: Path) -> dict[str, Any]:
        if path not in self._parsed:
            # Shared includes are parsed once; the merged mapping is copied, never mutated.
            raw = dict(load_with_includes_memo(path, self._includes)[0])
            # `path` was named (--tasks FILE.yaml) or found in a named folder: its own folder
            # counts as named, as lm-eval keeps utils.py beside the YAML.
            roots = [*self.include_paths, *self._custom_files, path.parent]
            refuse_code_outside(raw, path, roots)
            self._parsed[path] = raw
        return self._parsed[path]

    # --------------------------------------------------------------- lookup
    def names(self) -> list[str]:
        """Every task, group and tag name."""
        return sorted(
            {*self._python_tasks(), *self._python_groups, *self._python_tags, *self._yaml()}
        )

    def python_configs(self) -> dict[str, TaskConfig]:
        """Built-in and custom-file tasks by name (those an include path overrides left out)."""
        yaml_index = self._yaml()
        return {n: c for n, c in self._python_tasks().items() if n not in yaml_index}

    def yaml_entries(self) -> dict[str, IndexEntry]:
        """The include paths' tasks, groups and tags by name (found without building any task)."""
        return dict(self._yaml())

    def yaml_names(self) -> list[str]:
        """Task and group names of the include paths."""
        return sorted(n for n, e in self._yaml().items() if e.kind != "tag")

    def group_configs(self) -> dict[str, GroupConfig]:
        """Built-in and custom-file groups by name (those an include path overrides left out)."""
        self._python_tasks()
        yaml_index = self._yaml()
        return {n: g for n, g in self._python_groups.items() if n not in yaml_index}

    def kind(self, name: str) -> str | None:
        """'task', 'group' or 'tag' for a known name (include paths first), else None."""
        entry = self._yaml().get(name)
        if entry is not None:
            return entry.kind
        if name in self._python_tasks():
            return "task"
        if name in self._python_groups:
            return "group"
        return "tag" if name in self._python_tags else None

    def source(self, name: str) -> str | None:
        """The file that defines `name` (None for a tag)."""
        entry = self._yaml().get(name)
        if entry is not None:
            return entry.file
        kind = self.kind(name)
        if kind == "task":
            return self._python_tasks()[name].source
        return self._python_groups[name].source if kind == "group" else None

    def members(self, name: str) -> list[str]:
        """The leaf task names a group or tag runs (sorted, as lm-eval builds them)."""
        return sorted(set(self._leaves(name, ())))

    def _leaves(self, name: str, stack: tuple[str, ...]) -> list[str]:
        if name in stack:
            raise TaskConfigError(f"group {name!r} contains itself: {' -> '.join((*stack, name))}.")
        kind = self.kind(name)
        entry = self._yaml().get(name)
        if kind == "tag":
            return list(entry.members) if entry else list(self._python_tags[name])
        if kind != "group":
            return [name]
        items = entry.members if entry else self._python_groups[name].tasks
        return [leaf for item in items for leaf in self._member_leaves(item, name, (*stack, name))]

    def _member_leaves(self, item: Any, group: str, stack: tuple[str, ...]) -> list[str]:
        if isinstance(item, dict) and isinstance(item.get("group"), str):
            if self.kind(item["group"]) is not None:
                return self._leaves(item["group"], stack)
            inline = f"{group}::{item['group']}"
            return [
                leaf
                for sub in item.get("task") or []
                for leaf in self._member_leaves(sub, inline, stack)
            ]
        name = item.get("task") if isinstance(item, dict) else item
        if not isinstance(name, str):
            return []
        return self._leaves(name, stack) if self.kind(name) is not None else [f"{group}::{name}"]

    def _announce(self, name: str) -> None:
        """One log line when an include path's name hides a built-in of the same name."""
        if name in self._announced:
            return
        self._announced.add(name)
        python = self._python_tasks()
        if name in python:
            builtin = "task"
        elif name in self._python_groups:
            builtin = "group"
        elif name in self._python_tags:
            builtin = "tag"
        else:
            return
        entry = self._yaml()[name]
        where = entry.file or f"the tasks tagged {name!r} under {self._origin[name]}"
        log.warning(
            "%r is served by %s (--include-path), not by assay's built-in %s of that name.",
            name,
            where,
            builtin,
        )

    def get(self, name: str) -> TaskConfig | GroupConfig:
        """The task or group called `name` (YAML include paths win over built-ins)."""
        if name.endswith((".yaml", ".yml")) and Path(name).is_file():
            return self._from_yaml(Path(name))
        entry = self._yaml().get(name)
        if entry is not None:
            self._announce(name)
            if entry.kind == "tag":
                raise TaskConfigError(
                    f"{name!r} is a tag (a list of tasks: {', '.join(entry.members)}), not one task; "
                    "name one of its tasks."
                )
            return self._from_yaml(Path(entry.file))  # type: ignore[arg-type]
        python = self._python_tasks()
        if name in python:
            return python[name]
        if name in self._python_groups:
            return self._python_groups[name]
        if name in self._python_tags:
            raise TaskConfigError(
                f"{name!r} is a tag (a list of tasks: {', '.join(self._python_tags[name])}), "
                "not one task; name one of its tasks."
            )
        raise UnknownNameError("task", name, self.names(), self._broken_note())

    def _broken_note(self) -> str:
        """Why a name may be missing: the include paths' files that could not be read."""
        broken = [msg for folder in self.folder_indexes() for msg in folder.broken.values()]
        if not broken:
            return ""
        shown = " | ".join(b.rstrip(".") for b in broken[:3])
        more = f" (and {len(broken) - 3} more)" if len(broken) > 3 else ""
        return (
            f"{len(broken)} YAML file(s) under --include-path could not be read, so their names "
            f"are unknown: {shown}{more}. `assay validate --no-data` lists them all."
        )

    def _from_yaml(self, path: Path) -> TaskConfig | GroupConfig:
        raw = self._raw(path)
        # lm-eval's rule: a mapping with `group` (and no `class`) is a group.
        if "group" in raw and "class" not in raw:
            return group_config_from_yaml(raw, path)
        return self._task_from_yaml(path)

    def _task_from_yaml(self, path: Path, overrides: dict[str, Any] | None = None) -> TaskConfig:
        """The task of a YAML file (built once); with a group's overrides, a new config."""
        raw = self._raw(path)
        if overrides:
            raw = {**raw, **{k: v for k, v in overrides.items() if k != "tag"}}
            return task_config_from_yaml(raw, path)
        if path not in self._configs:
            self._configs[path] = task_config_from_yaml(raw, path)
        return self._configs[path]

    def resolve(self, task_strings: Iterable[str]) -> Resolved:
        """Task strings (`name`, `name|k`, group, tag, YAML path) to tasks and groups."""
        out = Resolved()
        seen: set[str] = set()
        for text in _expand_task_files(task_strings):
            spec = lighteval_suites.parse(text)
            if spec.suite is not None or self._lighteval_only(spec.name):
                self._add_lighteval(spec, out, seen)
                continue
            if spec.metric_params or spec.truncate:
                raise TaskConfigError(
                    f"task string {text!r}: metric parameters and truncation apply to lighteval's "
                    f"tasks; {spec.name!r} is assay's. Name lighteval's with its suite, e.g. "
                    f"'lighteval|{spec.name}|0'."
                )
            self._add(spec.name, spec.shots, out, seen, overrides={})
        if not out.tasks:
            raise TaskConfigError(
                "no tasks selected: pass --tasks NAME[,NAME...] (see `assay tasks list`)."
            )
        return out

    # --------------------------------------------------------------- lighteval
    def _lighteval_only(self, name: str) -> bool:
        """A name assay does not know that the installed lighteval defines."""
        if self.kind(name) is not None or not lighteval_suites.installed():
            return False
        return self._lighteval_builtins().has(name)

    def _lighteval_builtins(self) -> lighteval_suites.Builtins:
        if self._lighteval is None:
            self._lighteval = lighteval_suites.Builtins()
        return self._lighteval

    def _add_lighteval(
        self, spec: lighteval_suites.TaskString, out: Resolved, seen: set[str]
    ) -> None:
        """Add lighteval's task(s) for a task string: a lighteval task of a --custom-tasks file
        (with the suite `custom` or any other), else lighteval's built-in; the source printed."""
        where = f"task string {spec.text!r}"
        custom = self._custom_lighteval.get(spec.name) if self._python_tasks() else None
        if custom is not None:
            found = [(custom, self._python_tasks()[spec.name].source)]
        elif spec.suite == "custom":
            raise TaskConfigError(
                f"{where}: no lighteval task {spec.name!r} in the --custom-tasks files "
                f"({', '.join(str(p) for p in self._custom_files) or 'none given'})."
            )
        else:
            if not lighteval_suites.installed():
                raise missing_lighteval(
                    f"{where} names lighteval's task {spec.name!r} (from lighteval.tasks.tasks)"
                )
            found = self._lighteval_builtins().get(spec.name, where)
        for original, source in found:
            if custom is not None and not spec.metric_params:
                converted = replace(self._python_tasks()[spec.name])  # converted on import
            else:
                config = lighteval_suites.with_metric_params(
                    original, spec.metric_params, f"{where} (task {original.name!r})"
                )
                converted = config_from_lighteval(config, source)
            if spec.truncate:
                converted.truncate_fewshots = True
            ours = self.kind(converted.name)
            if custom is None and ours is not None:
                log.warning(
                    "%s: %r is lighteval's built-in (%s), chosen by the suite prefix; assay's "
                    "built-in %s of that name is `--tasks %s`.",
                    where, converted.name, source, ours, converted.name,
                )  # fmt: skip
            else:
                log.warning("%s: %r is lighteval's task (%s).", where, converted.name, source)
            if converted.name in seen:
                raise TaskConfigError(
                    f"{where}: task {converted.name!r} is already in this run (from another task "
                    "string); run lighteval's and assay's task of one name in separate runs."
                )
            seen.add(converted.name)
            # No shots in the string: the config's 0, as lighteval, unless --num-fewshot says.
            out.tasks.append(TaskRequest(converted, spec.shots))

    def _add(
        self, name: str, shots: int | None, out: Resolved, seen: set[str], overrides: dict[str, Any]
    ) -> list[str]:
        """Add `name` to `out`; the names it adds as a group's children (a tag adds its tasks)."""
        kind = self.kind(name)
        if kind == "tag":
            entry = self._yaml().get(name)
            if entry is not None:
                self._announce(name)
            members = entry.members if entry else self._python_tags[name]
            return [c for m in members for c in self._add(m, shots, out, seen, overrides)]
        entry = self._yaml().get(name)
        if entry is not None and entry.kind == "task" and overrides:
            self._announce(name)
            found: TaskConfig | GroupConfig = self._task_from_yaml(Path(entry.file), overrides)  # type: ignore[arg-type]
            overrides = {}
        else:
            found = self.get(name)
        if isinstance(found, GroupConfig):
            node = GroupNode(found)
            # The group's own settings push down to its members; a caller's win (lm-eval).
            pushed = {**found.overrides, **overrides}
            for child in found.tasks:
                node.children += self._add_child(child, shots, out, seen, pushed, found)
            node.children = list(dict.fromkeys(node.children))  # lm-eval keys children by name
            out.groups.append(node)
            return [found.name]
        if found.name not in seen:
            seen.add(found.name)
            config = _with_overrides(found, overrides) if overrides else found
            out.tasks.append(TaskRequest(config, shots))
        return [found.name]

    def _add_child(
        self,
        child: Any,
        shots: int | None,
        out: Resolved,
        seen: set[str],
        overrides: dict[str, Any],
        group: GroupConfig,
    ) -> list[str]:
        if isinstance(child, dict) and isinstance(child.get("group"), str):
            rest = {k: v for k, v in child.items() if k != "group"}
            if self.kind(child["group"]) is not None:
                return self._add(child["group"], shots, out, seen, {**overrides, **rest})
            # An inline group, named under its parent as lm-eval names it.
            inline = group_config_from_yaml(
                {**child, "group": f"{group.name}::{child['group']}"}, Path(group.source)
            )
            node = GroupNode(inline)
            pushed = {**inline.overrides, **overrides}
            for sub in inline.tasks:
                node.children += self._add_child(sub, shots, out, seen, pushed, inline)
            node.children = list(dict.fromkeys(node.children))
            out.groups.append(node)
            return [inline.name]
        if isinstance(child, dict) and isinstance(child.get("task"), str):
            name, item = child["task"], {**overrides, **child}
        elif isinstance(child, str):
            name, item = child, dict(overrides)
        else:
            raise TaskConfigError(
                f"{group.source} (group {group.name!r}): subtask entry {child!r} must be a name or a mapping with 'task' or 'group'."
            )
        if self.kind(name) is not None:
            return self._add(name, shots, out, seen, {k: v for k, v in item.items() if k != "task"})
        # Not a known name: a task defined inline in the group (lm-eval names it group::task).
        inline_name = f"{group.name}::{name}"
        config = task_config_from_yaml(
            {**{k: v for k, v in item.items() if k != "tag"}, "task": inline_name},
            Path(group.source),
        )
        if inline_name not in seen:
            seen.add(inline_name)
            out.tasks.append(TaskRequest(config, shots))
        return [inline_name]


_OVERRIDABLE = {
    "num_fewshot": "num_fewshots",
    "target_delimiter": "target_delimiter",
    "fewshot_delimiter": "fewshot_delimiter",
    "task_alias": "alias",
}


def _announce_custom(name: str, source: str | None, kind: str) -> None:
    """The line an include path's override gives (`Registry._announce`), for --custom-tasks."""
    log.warning(
        "%r is served by %s (--custom-tasks), not by assay's built-in %s of that name.",
        name,
        source,
        kind,
    )


def _with_overrides(config: TaskConfig, overrides: dict[str, Any]) -> TaskConfig:
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        if key in ("task", "tag"):  # lm-eval drops a pushed-down tag; the name stays
            continue
        if key in _OVERRIDABLE:
            changes[_OVERRIDABLE[key]] = value
        elif key == "generation_kwargs":
            changes["generation_kwargs"] = {**(config.generation_kwargs or {}), **value}
        elif key == "metadata":
            changes["metadata"] = {**config.metadata, **value}
        else:
            raise TaskConfigError(
                f"{config.where()}: a group sets '{key}' on it, which assay cannot push down to subtasks; set it in the task's own YAML."
            )
    return replace(config, **changes)


LM_EVAL_TREE = "lm-eval"
"""The --include-path value naming lm-eval's installed task tree (when no such folder exists)."""


def _include_path(value: str | Path) -> Path:
    """An include folder; `lm-eval` names the task tree of the installed lm-eval package."""
    path = Path(value)
    if path.exists():
        return path
    if str(value) == LM_EVAL_TREE:
        spec = importlib.util.find_spec("lm_eval")
        if spec is None or not spec.submodule_search_locations:
            raise TaskConfigError(
                f"--include-path {LM_EVAL_TREE}: lm-eval's task tree needs the lm-eval package, "
                "which is not installed; install it with pip install 'assay[lm-eval-tasks]'."
            )
        tree = Path(next(iter(spec.submodule_search_locations))) / "tasks"
        log.info("--include-path %s: lm-eval's installed task tree, %s", LM_EVAL_TREE, tree)
        return tree
    raise TaskConfigError(
        f"--include-path {value}: no such directory (or `{LM_EVAL_TREE}` for lm-eval's installed "
        "task tree)."
    )


def _expand_task_files(task_strings: Iterable[str]) -> list[str]:
    """Task strings, with a file of task strings (one per line, as lighteval's --tasks FILE)
    replaced by its lines; YAML task files stay as they are."""
    out: list[str] = []
    for text in task_strings:
        path = Path(text.strip())
        if path.suffix not in (".yaml", ".yml") and path.is_file():
            out += lighteval_suites.read_task_file(path)
        else:
            out.append(text)
    return out


def _plugin_modules() -> list[Any]:
    """Modules of installed task plugins (entry point group `assay.tasks`), each defining
    TASKS_TABLE (and optionally GROUPS) as a custom task file does. Imported with the built-in
    catalog, when Python tasks are first needed; a name they share with a built-in is theirs."""
    from importlib.metadata import entry_points

    modules = []
    for entry in entry_points(group="assay.tasks"):
        try:
            modules.append(entry.load())
        except Exception as exc:
            raise TaskConfigError(
                f"task plugin {entry.name!r} ({entry.value}, entry point group assay.tasks) "
                f"failed to load: {type(exc).__name__}: {exc}. Fix or uninstall "
                f"{entry.dist.name if entry.dist else 'the package that declares it'}."
            ) from exc
    return modules


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise TaskConfigError(
            f"custom task file {path} (--custom-tasks, or custom_tasks= in evaluate()): no such file."
        )
    # The module name reaches results.json (a task's recorded functions): it must not change
    # between processes, as hash() of a string does.
    digest = hashlib.sha256(str(path.resolve()).encode("utf-8")).hexdigest()[:16]
    key = f"assay_custom_tasks_{digest}"
    spec = importlib.util.spec_from_file_location(key, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] == "lighteval":
            raise missing_lighteval(
                f"--custom-tasks {path} imports {_failed_import(exc, path)}"
            ) from None
        raise TaskConfigError(
            f"{path}: importing the custom task file failed: {type(exc).__name__}: {exc}"
        ) from None
    except Exception as exc:
        raise TaskConfigError(
            f"{path}: importing the custom task file failed: {type(exc).__name__}: {exc}"
        ) from None
    sys.modules[key] = module
    return module


def _failed_import(exc: ModuleNotFoundError, path: Path) -> str:
    """The import statement of `path` that raised `exc` (its line), else the missing module."""
    tb = exc.__traceback__
    line = None
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename) == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    if line is None:
        return exc.name or "lighteval"
    text = path.read_text(encoding="utf-8").splitlines()[line - 1].strip()
    return f"lighteval (line {line}: `{text}`)"
