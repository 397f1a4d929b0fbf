"""Registry: one resolver over every source of tasks, with the precedence rules between them.

Sources (each in its own module): assay's built-in catalog, installed task plugins and
--custom-tasks files (`python_tasks`), YAML include paths (`include_paths`), among them lm-eval's
installed task tree (`lm_eval_tree`), and the task source that reads task strings
(`task_source`: another harness's tasks). The rules:
- a name defined both by an include path and by a Python task module is served by the include
  path, and a log line says which file;
- the task source decides which task strings name its tasks; the others name assay's;
- a group pushes its settings down to its members, a caller's settings win (as lm-eval).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from assay.errors import TaskConfigError, UnknownNameError
from assay.tasks.config import TaskConfig
from assay.tasks.index import FolderIndex, IndexEntry
from assay.tasks.lm_eval_yaml import GroupConfig, group_config_from_yaml, task_config_from_yaml
from assay.tasks.registry.include_paths import IncludePaths
from assay.tasks.registry.lm_eval_tree import include_folder
from assay.tasks.registry.python_tasks import PythonTasks
from assay.tasks.registry.resolved import GroupNode, Resolved, TaskRequest
from assay.tasks.registry.task_source import task_source

log = logging.getLogger(__name__)


class Registry:
    """All tasks a run can name."""

    def __init__(
        self,
        include_paths: Sequence[str | Path] = (),
        custom_tasks: Sequence[str | Path] = (),
        *,
        builtins: bool = True,
        confirm_run_unsafe_code: bool | None = None,
    ) -> None:
        """`confirm_run_unsafe_code`: the command's consent flag; when given, a YAML task that
        declares unsafe_code is refused without it before its Python is imported (None, for
        commands that take no such flag, imports it as before)."""
        self.include_paths = [include_folder(p) for p in include_paths]
        custom_files = [Path(p) for p in custom_tasks]
        self._python = PythonTasks(custom_files, builtins=builtins)
        self._yaml = IncludePaths(self.include_paths, custom_files, confirm_run_unsafe_code)
        self._strings = task_source().task_strings(self._python)
        self._announced: set[str] = set()

    # --------------------------------------------------------------- lookup
    def folder_indexes(self) -> list[FolderIndex]:
        """The index of each include path, in the order given."""
        return self._yaml.folder_indexes()

    def names(self) -> list[str]:
        """Every task, group and tag name."""
        python = self._python
        return sorted({*python.tasks(), *python.groups(), *python.tags(), *self._yaml.entries()})

    def python_configs(self) -> dict[str, TaskConfig]:
        """Built-in and custom-file tasks by name (those an include path overrides left out)."""
        yaml_index = self._yaml.entries()
        return {n: c for n, c in self._python.tasks().items() if n not in yaml_index}

    def yaml_entries(self) -> dict[str, IndexEntry]:
        """The include paths' tasks, groups and tags by name (found without building any task)."""
        return dict(self._yaml.entries())

    def yaml_names(self) -> list[str]:
        """Task and group names of the include paths."""
        return sorted(n for n, e in self._yaml.entries().items() if e.kind != "tag")

    def group_configs(self) -> dict[str, GroupConfig]:
        """Built-in and custom-file groups by name (those an include path overrides left out)."""
        groups = self._python.groups()
        yaml_index = self._yaml.entries()
        return {n: g for n, g in groups.items() if n not in yaml_index}

    def kind(self, name: str) -> str | None:
        """'task', 'group' or 'tag' for a known name (include paths first), else None."""
        entry = self._yaml.entries().get(name)
        if entry is not None:
            return entry.kind
        return self._python.kind(name)

    def source(self, name: str) -> str | None:
        """The file that defines `name` (None for a tag)."""
        entry = self._yaml.entries().get(name)
        if entry is not None:
            return entry.file
        kind = self.kind(name)
        if kind == "task":
            return self._python.tasks()[name].source
        return self._python.groups()[name].source if kind == "group" else None

    def members(self, name: str) -> list[str]:
        """The leaf task names a group or tag runs (sorted, as lm-eval builds them)."""
        return sorted(set(self._leaves(name, ())))

    def _leaves(self, name: str, stack: tuple[str, ...]) -> list[str]:
        if name in stack:
            raise TaskConfigError(f"group {name!r} contains itself: {' -> '.join((*stack, name))}.")
        kind = self.kind(name)
        entry = self._yaml.entries().get(name)
        if kind == "tag":
            return list(entry.members) if entry else list(self._python.tags()[name])
        if kind != "group":
            return [name]
        items = entry.members if entry else self._python.groups()[name].tasks
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
        builtin = self._python.kind(name)
        if builtin is None:
            return
        entry = self._yaml.entries()[name]
        where = entry.file or f"the tasks tagged {name!r} under {self._yaml.origin(name)}"
        log.warning(
            "%r is served by %s (--include-path), not by assay's built-in %s of that name.",
            name,
            where,
            builtin,
        )

    def get(self, name: str) -> TaskConfig | GroupConfig:
        """The task or group called `name` (YAML include paths win over built-ins)."""
        if name.endswith((".yaml", ".yml")):
            path = Path(name)
            if path.is_file():
                return self._yaml.from_yaml(path)
            if self.kind(name) is None:  # a path, not a task named like a file
                what = "a directory" if path.is_dir() else "no such file"
                raise TaskConfigError(
                    f"--tasks {name}: {what}. Give the path of a task YAML file, or a task "
                    "name (`assay tasks list`)."
                )
        entry = self._yaml.entries().get(name)
        if entry is not None:
            self._announce(name)
            if entry.kind == "tag":
                raise TaskConfigError(
                    f"{name!r} is a tag (a list of tasks: {', '.join(entry.members)}), not one task; "
                    "name one of its tasks."
                )
            return self._yaml.from_yaml(Path(entry.file))  # type: ignore[arg-type]
        python = self._python.tasks()
        if name in python:
            return python[name]
        if name in self._python.groups():
            return self._python.groups()[name]
        if name in self._python.tags():
            raise TaskConfigError(
                f"{name!r} is a tag (a list of tasks: {', '.join(self._python.tags()[name])}), "
                "not one task; name one of its tasks."
            )
        raise UnknownNameError("task", name, self.names(), self._yaml.broken_note())

    # --------------------------------------------------------------- resolving
    def resolve(self, task_strings: Iterable[str]) -> Resolved:
        """Task strings (`name`, `name|k`, group, tag, YAML path) to tasks and groups."""
        out = Resolved()
        seen: set[str] = set()
        for text in expand_task_files(task_strings):
            named = self._strings.resolve(text, seen, self.kind)
            if isinstance(named, list):
                out.tasks += named
            else:
                self._add(named.name, named.num_fewshot, out, seen, overrides={})
        if not out.tasks:
            raise TaskConfigError(
                "no tasks selected: pass --tasks NAME[,NAME...] (see `assay tasks list`)."
            )
        return out

    def _add(
        self,
        name: str,
        num_fewshot: int | None,
        out: Resolved,
        seen: set[str],
        overrides: dict[str, Any],
    ) -> list[str]:
        """Add `name` to `out`; the names it adds as a group's children (a tag adds its tasks)."""
        kind = self.kind(name)
        if kind == "tag":
            entry = self._yaml.entries().get(name)
            if entry is not None:
                self._announce(name)
            members = entry.members if entry else self._python.tags()[name]
            return [c for m in members for c in self._add(m, num_fewshot, out, seen, overrides)]
        entry = self._yaml.entries().get(name)
        if entry is not None and entry.kind == "task" and overrides:
            self._announce(name)
            found: TaskConfig | GroupConfig = self._yaml.task_from_yaml(Path(entry.file), overrides)  # type: ignore[arg-type]
            overrides = {}
        else:
            found = self.get(name)
        if isinstance(found, GroupConfig):
            node = GroupNode(found)
            # The group's own settings push down to its members; a caller's win (lm-eval).
            pushed = {**found.overrides, **overrides}
            for child in found.tasks:
                node.children += self._add_child(child, num_fewshot, out, seen, pushed, found)
            node.children = list(dict.fromkeys(node.children))  # lm-eval keys children by name
            out.groups.append(node)
            return [found.name]
        if found.name not in seen:
            seen.add(found.name)
            config = _with_overrides(found, overrides) if overrides else found
            out.tasks.append(TaskRequest(config, num_fewshot))
        return [found.name]

    def _add_child(
        self,
        child: Any,
        num_fewshot: int | None,
        out: Resolved,
        seen: set[str],
        overrides: dict[str, Any],
        group: GroupConfig,
    ) -> list[str]:
        if isinstance(child, dict) and isinstance(child.get("group"), str):
            rest = {k: v for k, v in child.items() if k != "group"}
            if self.kind(child["group"]) is not None:
                return self._add(child["group"], num_fewshot, out, seen, {**overrides, **rest})
            # An inline group, named under its parent as lm-eval names it.
            inline = group_config_from_yaml(
                {**child, "group": f"{group.name}::{child['group']}"}, Path(group.source)
            )
            node = GroupNode(inline)
            pushed = {**inline.overrides, **overrides}
            for sub in inline.tasks:
                node.children += self._add_child(sub, num_fewshot, out, seen, pushed, inline)
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
            return self._add(
                name, num_fewshot, out, seen, {k: v for k, v in item.items() if k != "task"}
            )
        # Not a known name: a task defined inline in the group (lm-eval names it group::task).
        inline_name = f"{group.name}::{name}"
        raw = {**{k: v for k, v in item.items() if k != "tag"}, "task": inline_name}
        self._yaml.check_consent(raw, Path(group.source))
        config = task_config_from_yaml(raw, Path(group.source))
        if inline_name not in seen:
            seen.add(inline_name)
            out.tasks.append(TaskRequest(config, num_fewshot))
        return [inline_name]


_OVERRIDABLE = {
    "num_fewshot": "num_fewshots",
    "target_delimiter": "target_delimiter",
    "fewshot_delimiter": "fewshot_delimiter",
    "task_alias": "alias",
}


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


def expand_task_files(task_strings: Iterable[str]) -> list[str]:
    """Task strings, with a file of task strings replaced by its lines (`TaskSource.
    read_task_file`); YAML task files stay as they are."""
    out: list[str] = []
    for text in task_strings:
        path = Path(text.strip())
        if path.suffix not in (".yaml", ".yml") and path.is_file():
            out += task_source().read_task_file(path)
        else:
            out.append(text)
    return out
