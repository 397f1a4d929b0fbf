"""The include folder `--include-path lm-eval` names: the task tree of the installed lm-eval."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

from assay.errors import TaskConfigError

log = logging.getLogger(__name__)

LM_EVAL_TREE = "lm-eval"
"""The --include-path value naming lm-eval's installed task tree (when no such folder exists)."""


def include_folder(value: str | Path) -> Path:
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
