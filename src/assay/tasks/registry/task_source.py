"""The hook through which another harness's task strings and task files reach the registry.

assay reads task strings in another harness's grammar (`suite|task|k`, metric parameters), so
the module that reads them (`peers.TASK_SOURCE`) also serves that harness's tasks and converts
its task configs in --custom-tasks files. The registry imports it by name, on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from assay import peers
from assay.errors import TaskConfigError
from assay.tasks.config import TaskConfig
from assay.tasks.registry.resolved import TaskRequest


@dataclass(frozen=True)
class TaskName:
    """A task string that names one of assay's own tasks (`name` or `name|k`)."""

    name: str
    num_fewshot: int | None = None


class TaskStrings(Protocol):
    """Reads the task strings of one run (built over its Python tasks)."""

    def resolve(
        self, text: str, seen: set[str], kind: Callable[[str], str | None]
    ) -> list[TaskRequest] | TaskName:
        """The source's tasks that `text` names (their names added to `seen`), or the name of
        assay's task it names; `kind` is assay's kind of a name (None: assay has none)."""
        ...


class TaskSource(Protocol):
    """The module named by `peers.TASK_SOURCE`."""

    def task_strings(self, custom: CustomTasks) -> TaskStrings:
        """The reader of one run's task strings."""
        ...

    def read_task_file(self, path: Path) -> list[str]:
        """The task strings of a file of task strings."""
        ...

    def convert_table(self, table: Sequence[Any], source: str) -> list[TaskConfig]:
        """A --custom-tasks file's TASKS_TABLE with the configs in the source's format converted
        (assay's TaskConfigs pass through)."""
        ...

    def originals(self, table: Sequence[Any]) -> dict[str, Any]:
        """The configs of a table written in the source's format, by name, as written."""
        ...

    def missing_import(self, exc: ModuleNotFoundError, path: Path) -> TaskConfigError | None:
        """The refusal of a --custom-tasks file whose import of the source's package failed;
        None when `exc` is about another package."""
        ...


class CustomTasks(Protocol):
    """What a task source reads of the run's Python tasks (`python_tasks.PythonTasks`)."""

    custom_files: list[Path]

    def tasks(self) -> dict[str, TaskConfig]: ...

    def custom_originals(self) -> dict[str, Any]: ...


def task_source() -> TaskSource:
    """The module that reads task strings and other harnesses' task files."""
    [module] = peers.load((peers.TASK_SOURCE,))
    source: TaskSource = module  # a module implements the Protocol with its functions
    return source
