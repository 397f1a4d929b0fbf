"""A task's plan: what a run fixes for a task before its first doc, built once.

`check_task` validates a task and builds its filters and metrics before any model is loaded (a
bad metric name fails in seconds, not after the model load). Once the backend is known, its
request plan (prompts, generation policy) completes the `TaskPlan` the run follows.
"""

from __future__ import annotations

from dataclasses import dataclass

from assay.errors import ConfigError
from assay.filters.base import FilterEnsemble
from assay.requests.plan import RequestPlan
from assay.scoring import ScoredMetric, build_filters, build_metrics
from assay.tasks.config import TaskConfig
from assay.tasks.task import Task


@dataclass(frozen=True)
class Scorers:
    """A task's filter ensembles and metrics."""

    filters: list[FilterEnsemble]
    metrics: list[ScoredMetric]

    @property
    def with_unconditioned(self) -> bool:
        """Whether a metric needs log P(choice | unconditioned query) (PMI)."""
        return any(m.metric.needs_unconditioned for m in self.metrics)


def check_task(config: TaskConfig, *, confirm_run_unsafe_code: bool) -> Scorers:
    """Validate `config` and build its scorers; unknown names and bad settings fail here."""
    config.validate()
    if config.unsafe_code and not confirm_run_unsafe_code:
        raise ConfigError(
            f"{config.where()} executes model-written code. Re-run with "
            "--confirm-run-unsafe-code if you accept that. assay's built-in code metrics "
            "(humaneval, mbpp) run each program in a subprocess with time and memory "
            "limits (no network or file isolation); a task's own scoring code (a "
            "'!function' metric, process_results) runs in this process, not sandboxed."
        )
    return Scorers(build_filters(config), build_metrics(config))


@dataclass(frozen=True)
class TaskPlan:
    """Everything the run does for one task: its docs, requests, filters and metrics."""

    task: Task
    requests: RequestPlan
    scorers: Scorers

    @property
    def name(self) -> str:
        return self.task.name
