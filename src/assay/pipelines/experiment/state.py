"""What an experiment knows about its current run, in one object its collaborators share.

`Experiment` hands this state to the collaborators that do its jobs (the shard runner, the
control queue, persistence, the views). Each config's progress (rows, metrics, time, failure)
is one `ConfigRun`, changed only through its own methods; the run's configs are reset in one
place when `run_evals` starts again. The store and the
lock outlive a reset: the store is the experiment's file, the lock guards config ids and the
control queue between the run's thread and the control endpoint's.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from assay.errors import AssayError, ConfigError
from assay.pipelines.configs.eval_config import EvalConfig
from assay.pipelines.configs.optuna_search import OptunaSearch
from assay.pipelines.shards.batch import _columns
from assay.pipelines.shards.early_stop import StopDecision
from assay.pipelines.shards.live_metrics import ConfigMetrics
from assay.pipelines.shards.scheduler import ShardScheduler, Status
from assay.pipelines.shards.store import ExperimentStore


@dataclass(slots=True, eq=False)
class ConfigRun:
    """One config of the run and what the run has learned about it so far."""

    config: EvalConfig
    metrics: ConfigMetrics
    """Its counts and live estimates, fed batch by batch."""
    records: list[dict[str, Any]] = field(default_factory=list)
    """Its scored rows as the user functions left them, in the order they ran."""
    seconds: float = 0.0
    """Time spent on its completed shards."""
    failure: AssayError | None = None
    """Why it failed, when it did."""
    first_error: tuple[int, str] | None = None
    """(row index, message) of its first failed row."""
    built: bool = False
    """Whether its RAG spec and prompt manager are built."""
    _final: dict[str, dict[str, Any]] | None = None
    """Its end-of-run metrics, computed once its shards are all in."""

    def restore(
        self,
        records: list[dict[str, Any]],
        seconds: float,
        first_error: tuple[int, str] | None,
    ) -> None:
        """Take back what its completed shards held when the experiment stopped."""
        self.records, self.seconds = records, seconds
        if first_error is not None:
            self.first_error = first_error

    def add_batch(self, records: list[dict[str, Any]], failed: tuple[int, str] | None) -> None:
        """A batch's scored rows, and its first failed row (kept if it is the config's first)."""
        if failed is not None and self.first_error is None:
            self.first_error = failed
        self.records.extend(records)

    def end_shard(self, seconds: float) -> None:
        """A shard done: its time counts, and end-of-run metrics are due again."""
        self.seconds += seconds
        self._final = None

    def fail(self, error: AssayError) -> None:
        self.failure = error

    def mark_built(self) -> None:
        self.built = True

    def user_metrics(self) -> dict[str, dict[str, Any]]:
        """The config's own metrics: live estimates, or once complete, its final ones."""
        if self.metrics.live:
            return self.metrics.current()
        if self._final is None:
            self._final = self.metrics.final(_columns(self.records))
        return self._final


class RunState:
    """The rows and shards of the run, each config's `ConfigRun`, and the store."""

    def __init__(self, name: str) -> None:
        self.name = name
        """The experiment's name, as messages give it."""
        self.store: ExperimentStore | None = None
        """``experiment.sqlite`` under the output folder, opened by the first run."""
        self.lock = threading.RLock()
        self.reset()

    def reset(self) -> None:
        """Forget the previous run (the store keeps what it wrote)."""
        self.rows: list[dict[str, Any]] = []
        self.shards: list[list[int]] = []
        self.runs: dict[int, ConfigRun] = {}
        """Each config of the run by id, in the order they were added."""
        self.secrets: set[str] = set()
        self.scheduler: ShardScheduler | None = None
        self.search: OptunaSearch | None = None
        self.next_id = 1
        self.early_stops: list[StopDecision] = []
        """The configs early stopping stopped, each with the comparison that decided it."""

    def add(self, config: EvalConfig) -> ConfigRun:
        """Start the config's `ConfigRun`, with metrics over this run's rows."""
        metrics = ConfigMetrics(
            len(self.rows),
            config.settings,
            config.compute_metrics_fn,
            config.accumulate_metrics_fn,
            where=f"config {config.config_id}",
        )
        run = self.runs[config.config_id] = ConfigRun(config, metrics)
        return run

    def take_id(self) -> int:
        """A config id no config of this experiment has had."""
        with self.lock:
            config_id, self.next_id = self.next_id, self.next_id + 1
            return config_id

    def statuses(self) -> dict[int, Status]:
        """Each config's status, by id."""
        assert self.scheduler is not None
        return {cid: self.scheduler.status(cid) for cid in self.runs}

    def configs(self) -> dict[int, EvalConfig]:
        """Each config of the run by id."""
        return {cid: run.config for cid, run in self.runs.items()}

    def failures(self) -> dict[int, AssayError]:
        """The failed configs by id, each with why."""
        return {cid: run.failure for cid, run in self.runs.items() if run.failure is not None}

    def check_known(self, config_id: int) -> None:
        """Refuse an id that is no config of this run."""
        if config_id not in self.runs:
            raise ConfigError(
                f"experiment {self.name!r} has no config {config_id}; ids: {sorted(self.runs)}"
            )
