"""An experiment's run and its store: opening a run over what the store kept, and adding configs.

A run opened with ``resume=True`` over a store written for the same dataset, shard count and seed
gets back each config (matched by its fingerprint, so it keeps its id), its completed shards and
its clones; a run with other settings is refused unless ``resume=False`` clears the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from assay.errors import ConfigError
from assay.pipelines.configs.eval_config import EvalConfig, expand, validate
from assay.pipelines.configs.fingerprint import fingerprint
from assay.pipelines.configs.optuna_search import OptunaSearch
from assay.pipelines.experiment.log import log
from assay.pipelines.experiment.restore import rebuild_clone, restore_shards
from assay.pipelines.experiment.state import RunState
from assay.pipelines.shards.early_stop import StopDecision
from assay.pipelines.shards.scheduler import ShardScheduler, Status
from assay.pipelines.shards.split import dataset_fingerprint, dataset_rows, shard_plan
from assay.pipelines.shards.store import ExperimentStore
from assay.util.redact import find_secrets


class ExperimentPersistence:
    """Keeps the run state and the experiment's store in step."""

    def __init__(self, state: RunState, output_dir: Path) -> None:
        self._state = state
        self._output_dir = output_dir

    def open_run(
        self, config_group: Any, dataset: Any, num_shards: int, seed: int, resume: bool
    ) -> list[Any]:
        """Reset the state for a new run of `dataset`, check the store's run against it (or
        clear the store), and return the config group's leaves."""
        state = self._state
        state.reset()
        state.rows = dataset_rows(dataset)
        order, state.shards = shard_plan(len(state.rows), num_shards, seed)
        leaves = expand(config_group, seed)
        if not leaves:
            raise ConfigError("run_evals: the config group expands to no configs")
        if state.store is None:
            state.store = ExperimentStore(self._output_dir / "experiment.sqlite")
        meta = {
            "name": state.name,
            "dataset_fingerprint": dataset_fingerprint(state.rows),
            "num_rows": len(state.rows),
            "num_shards": num_shards,
            "seed": seed,
        }
        stored = state.store.meta()
        if resume and stored:
            changed = [k for k in meta if stored.get(k) != meta[k]]
            if changed:
                raise ConfigError(
                    f"experiment {state.name!r} in {self._output_dir} was run with other "
                    f"{', '.join(changed)}; pass resume=False to start over, or use another name"
                )
        elif stored:
            state.store.clear()
        state.store.set_meta({**meta, "permutation": order})
        return leaves

    def add_configs(self, leaves: list[Any], config_group: Any, num_shards: int) -> None:
        """Register the run's configs (stored ones under their ids, with their progress), the
        stored clones and early stops, and bind an Optuna search to its first configs."""
        state = self._state
        assert state.store is not None
        state.scheduler = ShardScheduler(num_shards)
        stored_configs = state.store.configs()
        known = {c["fingerprint"]: c for c in reversed(stored_configs)}
        state.next_id = max((c["config_id"] for c in stored_configs), default=0) + 1
        ids = []
        for leaf in leaves:
            previous = known.pop(fingerprint(leaf), None)
            config_id = previous["config_id"] if previous else state.take_id()
            self.register(validate(leaf, config_id), previous)
            ids.append(config_id)
        self._restore_clones(stored_configs)
        state.early_stops = [
            StopDecision.from_dict(d)
            for d in state.store.early_stops()
            if d["config_id"] in state.runs
        ]
        state.search = config_group if isinstance(config_group, OptunaSearch) else None
        if state.search is not None:
            if len(ids) != state.search.n_initial:
                raise ConfigError(
                    f"RFOptuna: {state.search.n_initial - len(ids)} of the first configs keep more "
                    "reranked documents (top_n) than they retrieve (k); narrow the search space"
                )
            state.search.bind(ids)

    def _restore_clones(self, stored_configs: list[dict[str, Any]]) -> None:
        """Re-register the stored clones of this run's configs (by id, so parents come first)."""
        for stored in stored_configs:
            if stored["parent_id"] is None or stored["config_id"] in self._state.runs:
                continue
            try:
                clone = rebuild_clone(self._state.configs(), stored)
            except ConfigError as exc:
                log.warning(
                    "experiment %r: clone %d of config %d is not resumed (%s); clone it again "
                    "with clone_modify",
                    self._state.name,
                    stored["config_id"],
                    stored["parent_id"],
                    exc,
                )
                continue
            self.register(clone, stored)

    def register(
        self,
        config: EvalConfig,
        previous: dict[str, Any] | None = None,
        changes: dict[str, Any] | None = None,
    ) -> None:
        """Add a config to this run: new (`previous` None; a clone's storable `changes`), or
        as stored, with its completed shards restored."""
        state = self._state
        assert state.store is not None and state.scheduler is not None
        cid = config.config_id
        state.secrets |= find_secrets(config.model.knob_params())
        state.add(config)
        status = Status(previous["status"]) if previous else Status.NEW
        if status == Status.FAILED:
            status = Status.NEW
        if previous is None:
            state.store.add_config(
                cid, config.fingerprint, config.knobs(), config.parent_id, changes
            )
        completed = state.store.completed_shards(cid)
        completed = completed[
            : next((i for i, s in enumerate(completed) if s != i), len(completed))
        ]
        state.store.discard_partial(cid, completed)
        if completed:
            self._restore(cid, completed)
            status = Status.ONGOING if status == Status.NEW else status
        state.scheduler.add(cid, config.model.engine_key(), len(completed), status)
        state.store.set_status(cid, state.scheduler.status(cid).value)

    def _restore(self, cid: int, completed: list[int]) -> None:
        state = self._state
        assert state.store is not None
        run = state.runs[cid]
        restored = restore_shards(state.store, cid, completed, run.metrics)
        run.restore(restored.records, restored.seconds, restored.first_error)
