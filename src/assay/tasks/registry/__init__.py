"""Finding tasks by name: the built-in catalog, task plugins, custom task files, YAML include
paths (lm-eval's installed tree among them) and another harness's tasks, behind one resolver.

`Registry` (resolver.py) holds the precedence rules; each source has a module of its own:
python_tasks.py (catalog, plugins, --custom-tasks), include_paths.py, lm_eval_tree.py and the
task source that reads task strings (task_source.py, served from `assay.compat`). Log lines of every module go to the `assay.tasks.registry` logger's children.
"""

from assay.tasks.registry.custom_files import import_task_file as _import_file
from assay.tasks.registry.lm_eval_tree import LM_EVAL_TREE
from assay.tasks.registry.resolved import GroupNode, Resolved, TaskRequest
from assay.tasks.registry.resolver import Registry
from assay.tasks.registry.resolver import expand_task_files as _expand_task_files

__all__ = [
    "LM_EVAL_TREE",
    "GroupNode",
    "Registry",
    "Resolved",
    "TaskRequest",
    "_expand_task_files",
    "_import_file",
]
