"""lighteval's tasks in a run: lighteval configs of --custom-tasks files, and lighteval's built-ins.

Which one a task string means follows the rule in `assay.tasks.lighteval_suites`: a string with
a suite means lighteval's task (a custom file's first), one without a suite means assay's, and
lighteval's built-in only when assay has no task, group or tag of that name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from assay.errors import TaskConfigError
from assay.tasks import lighteval_suites
from assay.tasks.lighteval_files import config_from_lighteval, missing_lighteval
from assay.tasks.registry.python_tasks import PythonTasks
from assay.tasks.registry.resolved import TaskRequest

log = logging.getLogger(__name__)


class LightevalTasks:
    """Finds and converts the lighteval tasks a task string names."""

    def __init__(self, python: PythonTasks) -> None:
        self._python = python
        self._builtins: lighteval_suites.Builtins | None = None

    def _lighteval_builtins(self) -> lighteval_suites.Builtins:
        if self._builtins is None:
            self._builtins = lighteval_suites.Builtins()
        return self._builtins

    def has_builtin(self, name: str) -> bool:
        """Whether the installed lighteval (if any) defines a task `name`."""
        if not lighteval_suites.installed():
            return False
        return self._lighteval_builtins().has(name)

    def requests(
        self,
        spec: lighteval_suites.TaskString,
        seen: set[str],
        kind: Callable[[str], str | None],
    ) -> list[TaskRequest]:
        """lighteval's task(s) for a task string: a lighteval task of a --custom-tasks file
        (with the suite `custom` or any other), else lighteval's built-in; the source printed.
        `kind` is assay's kind of a name (None when assay has none); names go into `seen`."""
        where = f"task string {spec.text!r}"
        python = self._python
        custom = python.custom_lighteval().get(spec.name) if python.tasks() else None
        if custom is not None:
            found = [(custom, python.tasks()[spec.name].source)]
        elif spec.suite == "custom":
            raise TaskConfigError(
                f"{where}: no lighteval task {spec.name!r} in the --custom-tasks files "
                f"({', '.join(str(p) for p in python.custom_files) or 'none given'})."
            )
        else:
            if not lighteval_suites.installed():
                raise missing_lighteval(
                    f"{where} names lighteval's task {spec.name!r} (from lighteval.tasks.tasks)"
                )
            found = self._lighteval_builtins().get(spec.name, where)
        out = []
        for original, source in found:
            if custom is not None and not spec.metric_params:
                converted = replace(python.tasks()[spec.name])  # converted on import
            else:
                config = lighteval_suites.with_metric_params(
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
