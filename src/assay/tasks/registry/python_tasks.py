"""Tasks defined in Python: assay's built-in catalog, installed task plugins, --custom-tasks files.

Each module defines TASKS_TABLE (TaskConfigs; a custom file's configs in another harness's format
are converted by the task source)
and optionally GROUPS. They are read in that order, so a name a plugin shares with a built-in is
the plugin's, and a custom file's is the custom file's (said in a log line).
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from pathlib import Path
from typing import Any

from assay.errors import TaskConfigError
from assay.tasks.config import TaskConfig
from assay.tasks.lm_eval_yaml import GroupConfig, resolve_data_files
from assay.tasks.registry.custom_files import import_task_file
from assay.tasks.registry.task_source import task_source

log = logging.getLogger(__name__)


class PythonTasks:
    """The tasks, groups and tags of the Python task modules, imported when first asked for."""

    def __init__(self, custom_files: list[Path], *, builtins: bool) -> None:
        self.custom_files = custom_files
        self._builtins = builtins
        self._tasks: dict[str, TaskConfig] | None = None
        self._groups: dict[str, GroupConfig] = {}
        self._tags: dict[str, list[str]] = {}
        self._custom_originals: dict[str, Any] = {}
        """The custom files' configs in another harness's format, by name (before conversion)."""

    def tasks(self) -> dict[str, TaskConfig]:
        """Every task by name (the modules imported on the first call)."""
        if self._tasks is None:
            self._tasks = {}
            modules = []
            if self._builtins:
                modules += [
                    importlib.import_module(f"assay.catalog.{m}") for m in _catalog_modules()
                ]
                modules += _plugin_modules()
            custom = [import_task_file(p) for p in self.custom_files]
            modules += custom
            builtin: set[str] = set()
            for module in modules:
                table = getattr(module, "TASKS_TABLE", None)
                if table is None:
                    raise TaskConfigError(
                        f"{module.__file__}: a task module must define TASKS_TABLE, a list of TaskConfig."
                    )
                if module in custom:
                    source = task_source()
                    self._custom_originals.update(source.originals(table))
                    table = source.convert_table(table, module.__file__ or module.__name__)
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
                    earlier = self._tasks.get(config.name)
                    if earlier is not None and module in custom and earlier.name in builtin:
                        _announce_custom(config.name, config.source, "task")
                    elif earlier is not None:
                        log.info(
                            "task %s: %s replaces %s", config.name, config.source, earlier.source
                        )
                    self._tasks[config.name] = config
                    for tag in config.tags:
                        self._tags.setdefault(tag, []).append(config.name)
                for group in getattr(module, "GROUPS", []):
                    if module in custom and group.name in self._groups:
                        _announce_custom(group.name, group.source or module.__file__, "group")
                    self._groups[group.name] = group
                if module not in custom:
                    builtin.update(c.name for c in table)
        return self._tasks

    def groups(self) -> dict[str, GroupConfig]:
        """Every group by name."""
        self.tasks()
        return self._groups

    def tags(self) -> dict[str, list[str]]:
        """Every tag with the names of its tasks."""
        self.tasks()
        return self._tags

    def custom_originals(self) -> dict[str, Any]:
        """The custom files' configs in another harness's format, by name, as written (before
        conversion)."""
        self.tasks()
        return self._custom_originals

    def kind(self, name: str) -> str | None:
        """'task', 'group' or 'tag' for a name these modules define, else None."""
        if name in self.tasks():
            return "task"
        if name in self._groups:
            return "group"
        return "tag" if name in self._tags else None


def _catalog_modules() -> list[str]:
    from assay import catalog

    return sorted(
        m.name for m in pkgutil.iter_modules(catalog.__path__) if not m.name.startswith("_")
    )


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


def _announce_custom(name: str, source: str | None, kind: str) -> None:
    """The line an include path's override gives (`Registry._announce`), for --custom-tasks."""
    log.warning(
        "%r is served by %s (--custom-tasks), not by assay's built-in %s of that name.",
        name,
        source,
        kind,
    )
