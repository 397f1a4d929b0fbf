"""Tasks, groups and tags of YAML include paths, and YAML task files named directly.

Include paths are indexed as lm-eval indexes them (`assay.tasks.index`: every YAML parsed, the
result cached per folder), so a task, group or tag name means what it means to lm-eval; a later
include path overrides an earlier one. A YAML file is turned into a TaskConfig only when its
task is used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from assay.tasks._yaml_io import (
    Memo,
    consent_to_task_code,
    load_with_includes_memo,
    refuse_code_outside,
)
from assay.tasks.config import TaskConfig
from assay.tasks.index import FolderIndex, IndexEntry, build_folder_index
from assay.tasks.lm_eval_yaml import GroupConfig, group_config_from_yaml, task_config_from_yaml


class IncludePaths:
    """The include paths' index, and the tasks and groups of their YAML files."""

    def __init__(
        self, folders: list[Path], custom_files: list[Path], consent: bool | None = None
    ) -> None:
        self.folders = folders
        self._consent = consent
        self._announced: set[tuple[Path, str]] = set()
        self._custom_files = custom_files
        self._indexes: list[FolderIndex] | None = None
        self._entries: dict[str, IndexEntry] | None = None
        self._origin: dict[str, Path] = {}
        self._parsed: dict[Path, dict[str, Any]] = {}
        self._includes = Memo()
        self._configs: dict[Path, TaskConfig] = {}

    def folder_indexes(self) -> list[FolderIndex]:
        """The index of each include path, in the order given."""
        if self._indexes is None:
            self._indexes = [build_folder_index(root) for root in self.folders]
        return self._indexes

    def entries(self) -> dict[str, IndexEntry]:
        """The include paths' names; a later include path overrides an earlier one (as lm-eval)."""
        if self._entries is None:
            self._entries = {}
            for folder in self.folder_indexes():
                for name, entry in folder.entries.items():
                    self._entries[name] = entry
                    self._origin[name] = folder.root
        return self._entries

    def origin(self, name: str) -> Path:
        """The include path that defines `name`."""
        self.entries()
        return self._origin[name]

    def _raw(self, path: Path) -> dict[str, Any]:
        if path not in self._parsed:
            # Shared includes are parsed once; the merged mapping is copied, never mutated.
            raw = dict(load_with_includes_memo(path, self._includes)[0])
            # `path` was named (--tasks FILE.yaml) or found in a named folder: its own folder
            # counts as named, as lm-eval keeps utils.py beside the YAML.
            roots = [*self.folders, *self._custom_files, path.parent]
            refuse_code_outside(raw, path, roots)
            self._parsed[path] = raw
        return self._parsed[path]

    def from_yaml(self, path: Path) -> TaskConfig | GroupConfig:
        """The task or group a YAML file defines."""
        raw = self._raw(path)
        # lm-eval's rule: a mapping with `group` (and no `class`) is a group.
        if "group" in raw and "class" not in raw:
            return group_config_from_yaml(raw, path)
        return self.task_from_yaml(path)

    def task_from_yaml(self, path: Path, overrides: dict[str, Any] | None = None) -> TaskConfig:
        """The task of a YAML file (built once); with a group's overrides, a new config."""
        raw = self._raw(path)
        if overrides:
            raw = {**raw, **{k: v for k, v in overrides.items() if k != "tag"}}
            self.check_consent(raw, path)
            return task_config_from_yaml(raw, path)
        if path not in self._configs:
            self.check_consent(raw, path)
            self._configs[path] = task_config_from_yaml(raw, path)
        return self._configs[path]

    def check_consent(self, raw: dict[str, Any], path: Path) -> None:
        """Before a task's Python is imported: refused without the command's consent flag when
        its YAML declares unsafe_code (`consent_to_task_code`); nothing for commands that take
        no such flag."""
        # repr: the name is checked later, and may be any YAML value here (a list, a mapping)
        key = (path, repr(raw.get("task")))
        noticed = self._consent is not None and key not in self._announced
        if noticed and consent_to_task_code(raw, path, bool(self._consent)):
            self._announced.add(key)  # one notice per task

    def broken_note(self) -> str:
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
