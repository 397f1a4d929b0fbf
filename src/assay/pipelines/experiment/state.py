"""What an experiment knows about its current run, in one object its collaborators share.

`Experiment` hands this state to the collaborators that do its jobs (the shard runner, the
control queue, persistence, the views), so each config's rows, metrics, timings and failures
have one owner and are reset in one place when `run_evals` starts again. The store and the
lock outlive a reset: the store is the experiment's file, the lock guards config ids and the
control queue between the run's thread and the control endpoint's.
"""

from __future__ import annotations

import threading
from typing import Any

from assay.errors import AssayError, ConfigError
from assay.pipelines.configs.eval_config import EvalConfig
from assay.pipelines.configs.optuna_search import OptunaSearch
from assay.pipelines.shards.batch import _columns
from assay.pipelines.shards.early_stop import StopDecision
from assay.pipelines.shards.live_metrics import ConfigMetrics
from assay.pipelines.shards.scheduler import ShardScheduler, Status
from assay.pipelines.shards.store import ExperimentStore


class RunState:
    """The rows and shards of the run, each config with its progress, and the store."""

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
        self.configs: dict[int, EvalConfig] = {}
        self.metrics: dict[int, ConfigMetrics] = {}
        self.records: dict[int, list[dict[str, Any]]] = {}
        self.seconds: dict[int, float] = {}
        self.failures: dict[int, AssayError] = {}
        self.first_error: dict[int, tuple[int, str]] = {}
        """config id -> (row index, message) of its first failed row."""
        self.final: dict[int, dict[str, dict[str, Any]]] = {}
        self.built: set[int] = set()
        self.secrets: set[str] = set()
        self.scheduler: ShardScheduler | None = None
        self.search: OptunaSearch | None = None
        self.next_id = 1
        self.early_stops: list[StopDecision] = []
        """The configs early stopping stopped, each with the comparison that decided it."""

    def take_id(self) -> int:
        """A config id no config of this experiment has had."""
        with self.lock:
            config_id, self.next_id = self.next_id, self.next_id + 1
            return config_id

    def statuses(self) -> dict[int, Status]:
        """Each config's status, by id."""
        assert self.scheduler is not None
        return {cid: self.scheduler.status(cid) for cid in self.configs}

    def check_known(self, config_id: int) -> None:
        """Refuse an id that is no config of this run."""
        if config_id not in self.configs:
            raise ConfigError(
                f"experiment {self.name!r} has no config {config_id}; ids: {sorted(self.configs)}"
            )

    def user_metrics(self, config_id: int) -> dict[str, dict[str, Any]]:
        """The config's own metrics: live estimates, or once complete, its final ones."""
        state = self.metrics[config_id]
        if state.live:
            return state.current()
        if config_id not in self.final:
            self.final[config_id] = state.final(_columns(self.records[config_id]))
        return self.final[config_id]
