"""Stop, resume, delete and clone configs of an experiment, also while `run_evals` runs.

While a run is in progress, operations (from the notebook, `on_shard_complete` or the control
endpoint's thread) are queued and applied between shards, so the shard in flight finishes
first; otherwise they apply at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assay.pipelines.configs.eval_config import validate
from assay.pipelines.experiment.cloning import apply_changes
from assay.pipelines.experiment.log import ExperimentLog
from assay.pipelines.experiment.persistence import ExperimentPersistence
from assay.pipelines.experiment.state import RunState
from assay.pipelines.shards.scheduler import Status
from assay.pipelines.shards.store import is_plain_json
from assay.util.redact import redact


class ExperimentControl:
    """The queue of interactive operations on the run's configs."""

    def __init__(
        self, state: RunState, persistence: ExperimentPersistence, file_log: ExperimentLog
    ) -> None:
        self._state = state
        self._persistence = persistence
        self._file_log = file_log
        self._pending: list[Callable[[], None]] = []
        self.running = False
        """Whether a run is in progress (operations wait for the end of its shard)."""

    def _queue(self, op: Callable[[], None]) -> None:
        with self._state.lock:
            if self.running:
                self._pending.append(op)
                return
        op()

    def apply_pending(self) -> None:
        """Apply the operations queued since the last shard, in order."""
        with self._state.lock:
            ops, self._pending = self._pending, []
        for op in ops:
            op()

    def set(self, config_id: int, action: str) -> None:
        """The scheduler's `action` ("stop", "resume" or "delete") on a config, stored."""
        state = self._state

        def op() -> None:
            assert state.scheduler is not None and state.store is not None
            getattr(state.scheduler, action)(config_id)
            state.store.set_status(config_id, state.scheduler.status(config_id).value)

        state.check_known(config_id)
        self._queue(op)

    def cancel_current(self) -> None:
        """See `Experiment.cancel_current`."""
        for cid, status in self._state.statuses().items() if self._state.scheduler else ():
            if status in (Status.NEW, Status.ONGOING):
                self.set(cid, "stop")
        self._file_log.info("cancel_current: every active config stops after its shard in flight")

    def clone_modify(self, config_id: int, changes: dict[str, Any]) -> int:
        """See `Experiment.clone_modify`."""
        state = self._state
        state.check_known(config_id)
        parent = state.runs[config_id].config
        new_id = state.take_id()
        clone = validate(apply_changes(parent.leaf, changes), new_id, parent_id=config_id)
        storable = is_plain_json(changes) and redact(changes) == changes
        kept = dict(changes) if storable else None
        self._queue(lambda: self._persistence.register(clone, changes=kept))
        return new_id
