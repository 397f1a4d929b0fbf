"""lighteval's tasks in a run: the registry's task source (`peers.TASK_SOURCE`,
`tasks.registry.task_source.TaskSource`): task strings, lighteval configs of --custom-tasks files,
and lighteval's built-ins.

Which one a task string means follows the rule in `suites`: a string with a suite means
lighteval's task (a custom file's first), one without a suite means assay's, and lighteval's
built-in only when assay has no task, group or tag of that name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from assay.compat.lighteval import suites
from assay.compat.lighteval.files import (
    config_from_lighteval,
    convert_table,
    is_lighteval_config,
    missing_lighteval,
)
from assay.compat.lighteval.suites import read_task_file
from assay.errors import TaskConfigError
from assay.tasks.registry.resolved import TaskRequest
from assay.tasks.registry.task_source import CustomTasks, TaskName

# The registry's name for these log lines, which users' log settings may already select.
log = logging.getLogger("assay.tasks.registry.lighteval")

__all__ = ["convert_table", "missing_import", "originals", "read_task_file", "task_strings"]


def task_strings(custom: CustomTasks) -> LightevalTasks:
    """The reader of one run's task strings."""
    return LightevalTasks(custom)


def originals(table: Sequence[Any]) -> dict[str, Any]:
    """The LightevalTaskConfigs of a custom file's table, by name, as written."""
    return {c.name: c for c in table if is_lighteval_config(c)}


def missing_import(exc: ModuleNotFoundError, path: Path) -> TaskConfigError | None:
    """A custom task file that imports lighteval, without lighteval installed: the refusal
    naming the import's line and how to install it; None for any other missing module."""
    if (exc.name or "").split(".")[0] != "lighteval":
        return None
    return missing_lighteval(f"--custom-tasks {path} imports {_failed_import(exc, path)}")


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


class LightevalTasks:
    """Reads task strings; finds and converts the lighteval tasks they name."""

    def __init__(self, python: CustomTasks) -> None:
        self._python = python
        self._builtins: suites.Builtins | None = None

    def _lighteval_builtins(self) -> suites.Builtins:
        if self._builtins is None:
            self._builtins = suites.Builtins()
        return self._builtins

    def has_builtin(self, name: str) -> bool:
        """Whether the installed lighteval (if any) defines a task `name`."""
        if not suites.installed():
            return False
        return self._lighteval_builtins().has(name)

    def resolve(
        self, text: str, seen: set[str], kind: Callable[[str], str | None]
    ) -> list[TaskRequest] | TaskName:
        """lighteval's tasks that `text` names, or the name of assay's task it names."""
        spec = suites.parse(text)
        if spec.suite is not None or (kind(spec.name) is None and self.has_builtin(spec.name)):
            return self.requests(spec, seen, kind)
        if spec.metric_params or spec.truncate:
            raise TaskConfigError(
                f"task string {text!r}: metric parameters and truncation apply to lighteval's "
                f"tasks; {spec.name!r} is assay's. Name lighteval's with its suite, e.g. "
                f"'lighteval|{spec.name}|0'."
            )
        return TaskName(spec.name, spec.num_fewshot)

    def requests(
        self,
        spec: suites.TaskString,
        seen: set[str],
        kind: Callable[[str], str | None],
    ) -> list[TaskRequest]:
        """lighteval's task(s) for a task string: a lighteval task of a --custom-tasks file
        (with the suite `custom` or any other), else lighteval's built-in; the source printed.
        `kind` is assay's kind of a name (None when assay has none); names go into `seen`."""
        where = f"task string {spec.text!r}"
        python = self._python
        custom = python.custom_originals().get(spec.name) if python.tasks() else None
        if custom is not None:
            found = [(custom, python.tasks()[spec.name].source)]
        elif spec.suite == "custom":
            raise TaskConfigError(
                f"{where}: no lighteval task {spec.name!r} in the --custom-tasks files "
                f"({', '.join(str(p) for p in python.custom_files) or 'none given'})."
            )
        else:
            if not suites.installed():
                raise missing_lighteval(
                    f"{where} names lighteval's task {spec.name!r} (from lighteval.tasks.tasks)"
                )
            found = self._lighteval_builtins().get(spec.name, where)
        out = []
        for original, source in found:
            if custom is not None and not spec.metric_params:
                converted = replace(python.tasks()[spec.name])  # converted on import
            else:
                config = suites.with_metric_params(
                    original, spec.metric_params, f"{where} (task {original.name!r})"
                )
                converted = config_from_lighteval(config, source)
            if spec.truncate:
                converted.truncate_fewshots = True
            ours = kind(converted.name)
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
            out.append(TaskRequest(converted, spec.num_fewshot))
        return out
