"""Importing a --custom-tasks file (a Python module defining TASKS_TABLE) by its path."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from assay.errors import TaskConfigError
from assay.tasks.registry.task_source import task_source


def import_task_file(path: Path) -> Any:
    """The module of a custom task file, under a name that is the same in every process."""
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
        refused = task_source().missing_import(exc, path)
        if refused is not None:
            raise refused from None
        raise TaskConfigError(
            f"{path}: importing the custom task file failed: {type(exc).__name__}: {exc}"
        ) from None
    except Exception as exc:
        raise TaskConfigError(
            f"{path}: importing the custom task file failed: {type(exc).__name__}: {exc}"
        ) from None
    sys.modules[key] = module
    return module
