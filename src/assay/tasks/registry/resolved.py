"""What task strings resolve to: the tasks to run, each with its shots, and the groups over them."""

from __future__ import annotations

from dataclasses import dataclass, field

from assay.tasks.config import TaskConfig
from assay.tasks.lm_eval_yaml import GroupConfig


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
