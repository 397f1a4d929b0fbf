"""The scheduling loop of `run_evals`: which config runs which shard next, and what follows a shard.

The shard scheduler picks the least advanced active config (see pipelines.shards.scheduler); the runner
runs that config's shard batch by batch, writes its rows and metric entries to the store, and
completes the shard only when the config's error budget holds. After each shard it applies the
early-stopping rule and reports to an Optuna search. `BackgroundRun` runs it in a thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from assay.errors import AssayError, ConfigError, ModelError
from assay.pipelines.configs.eval_config import expand, validate
from assay.pipelines.experiment.control import ExperimentControl
from assay.pipelines.experiment.log import ExperimentLog, log
from assay.pipelines.experiment.persistence import ExperimentPersistence
from assay.pipelines.experiment.state import ConfigRun, RunState
from assay.pipelines.experiment.views import ExperimentViews, Results
from assay.pipelines.rag.resources import SharedResources
from assay.pipelines.shards.batch import run_batch
from assay.pipelines.shards.early_stop import EarlyStop, MetricTrace, decide
from assay.pipelines.shards.engines import EnginePool
from assay.pipelines.shards.live_metrics import SAMPLES, batch_entries
from assay.pipelines.shards.scheduler import ACTIVE, Status
from assay.util.redact import scrub


def check_early_stop(early_stop: Any) -> EarlyStop | None:
    """run_evals' `early_stop`, refused unless it is an EarlyStop (or None)."""
    if early_stop is not None and not isinstance(early_stop, EarlyStop):
        raise ConfigError(
            f"run_evals early_stop must be an EarlyStop(metric, ...), got "
            f"{type(early_stop).__name__}"
        )
    return early_stop


def check_error_rate(max_error_rate: Any) -> float:
    """run_evals' `max_error_rate`, refused unless it is a share between 0 and 1."""
    if isinstance(max_error_rate, bool) or not (
        isinstance(max_error_rate, int | float) and 0.0 <= max_error_rate <= 1.0
    ):
        raise ConfigError(
            f"run_evals max_error_rate={max_error_rate!r}: give a share of rows between 0 "
            "and 1 (e.g. 0.05 fails a config once more than 5% of its rows failed)"
        )
    return float(max_error_rate)


class BackgroundRun:
    """An experiment's run in a thread of its own (`start_evals`, then `wait`)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._thread: threading.Thread | None = None
        self._outcome: Results | BaseException | None = None

    @property
    def alive(self) -> bool:
        """Whether the thread is still running."""
        return self._thread is not None and self._thread.is_alive()

    def start(self, run: Callable[[], Results]) -> None:
        """Call `run` in a new thread (refused while one is running)."""
        if self.alive:
            raise ConfigError(f"experiment {self._name!r} is already running")

        def target() -> None:
            try:
                self._outcome = run()
            except BaseException as exc:
                self._outcome = exc

        self._outcome = None
        self._thread = threading.Thread(target=target, name=f"assay-{self._name}", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None) -> Results:
        """The run's results once it finishes (its exception, if it failed)."""
        if self._thread is None:
            raise ConfigError("wait() needs a run started with start_evals()")
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"experiment {self._name!r} still running after {timeout} s")
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        assert self._outcome is not None
        return self._outcome


class ShardRunner:
    """Runs the active configs of the run state shard by shard."""

    def __init__(
        self,
        state: RunState,
        *,
        views: ExperimentViews,
        control: ExperimentControl,
        persistence: ExperimentPersistence,
        resources: SharedResources,
        file_log: ExperimentLog,
    ) -> None:
        self._state = state
        self._views = views
        self._control = control
        self._persistence = persistence
        self._resources = resources
        self._file_log = file_log

    def run(
        self,
        engines: EnginePool,
        max_error_rate: float,
        early_stop: EarlyStop | None,
        after_shard: Callable[[int, int], None],
    ) -> None:
        """Run shards until no config is active; `after_shard(config_id, shard)` after each."""
        state = self._state
        assert state.scheduler is not None
        while True:
            loaded = engines.loaded_keys[-1] if engines.loaded_keys else None
            pick = state.scheduler.next(loaded)
            if pick is None:
                return
            config_id, shard = pick
            self._run_shard(config_id, shard, engines, max_error_rate)
            self._stop_beaten(early_stop)
            if state.search is not None:
                self._search_step(config_id, shard)
            after_shard(config_id, shard)

    def _ensure_built(self, run: ConfigRun) -> None:
        if run.built:
            return
        for part in (run.config.rag, run.config.prompt_manager):
            if part is not None:
                part.build(self._resources)
        run.mark_built()

    def _run_shard(self, cid: int, shard: int, engines: EnginePool, max_error_rate: float) -> None:
        state = self._state
        assert state.store is not None and state.scheduler is not None
        run = state.runs[cid]
        config, metrics = run.config, run.metrics
        started = time.perf_counter()
        rows = state.shards[shard]
        shard_errors = 0
        try:
            self._ensure_built(run)
            for b, start in enumerate(range(0, len(rows), config.batch_size)):
                indices = rows[start : start + config.batch_size]
                where = f"config {cid}, shard {shard}, batch {b}"
                outcome = run_batch(
                    config, [state.rows[i] for i in indices], indices, engines, where
                )
                stored = [
                    replace(row, error=scrub(row.error, state.secrets) if row.error else None)
                    for row in outcome.stored_rows(cid, shard)
                ]
                failed = next(((r.row_index, r.error) for r in stored if r.error), None)
                entries = batch_entries(outcome.metrics, len(outcome.scored))
                state.store.write_batch(cid, shard, b, stored, entries)
                n_errors = len(indices) - len(outcome.scored)
                shard_errors += n_errors
                metrics.add_batch(
                    len(outcome.scored),
                    n_errors,
                    entries,
                    outcome.row_scores,
                    [outcome.row_indices[i] for i in outcome.scored],
                )
                run.add_batch([outcome.records[i] for i in outcome.scored], failed)
            metrics.end_shard()
            # Before the shard counts as complete: a resumed run redoes it.
            self._check_errors(cid, max_error_rate)
            seconds = time.perf_counter() - started
            run.end_shard(seconds)
            state.store.complete_shard(cid, shard, len(rows), shard_errors, seconds)
            state.scheduler.complete(cid, shard)
            if state.scheduler.status(cid) == Status.COMPLETED:
                run.user_metrics()  # a failing end-of-run compute_metrics_fn fails the config
            snapshot = self._views.metrics(cid) if metrics.live else {}
            state.store.record_metrics(cid, shard + 1, metrics.samples, snapshot)
        except AssayError as exc:
            run.fail(exc)
            state.scheduler.fail(cid)
            log.error("experiment %r: %s", state.name, scrub(str(exc), state.secrets))
        error = run.failure
        message = scrub(str(error), state.secrets) if error else None
        status = state.scheduler.status(cid).value
        state.store.set_status(cid, status, message)
        self._file_log.info(
            f"config {cid}: shard {shard} done, {metrics.samples} rows scored, {status}"
            + (f" ({message})" if message else "")
        )

    def _check_errors(self, cid: int, max_error_rate: float) -> None:
        """Fail the config when its rows failed beyond max_error_rate (see ConfigMetrics)."""
        run = self._state.runs[cid]
        why = run.metrics.error_budget_exceeded(max_error_rate)
        if why is None:
            return
        assert run.first_error is not None  # failed rows exceed the budget: one came first
        row, message = run.first_error
        raise ModelError(
            f"config {cid}: {why}; first error, row {row}: {message}. Its failed shard is not "
            "kept: fix the cause and run again to redo it (completed shards are kept)"
        )

    def _stop_beaten(self, rule: EarlyStop | None) -> None:
        """Apply the early-stopping rule after a shard (see assay.pipelines.shards.early_stop)."""
        if rule is None:
            return
        state = self._state
        assert state.scheduler is not None and state.store is not None
        traces: dict[int, MetricTrace] = {}
        for cid, status in state.statuses().items():
            metrics = state.runs[cid].metrics
            if status in (Status.DELETED, Status.FAILED) or not metrics.samples:
                continue
            trace = metrics.trace(rule.metric)
            if trace is None:
                raise ConfigError(
                    f"early_stop metric {rule.metric!r}: config {cid} has no such metric; "
                    f"its metrics: {sorted(self._metric_names(cid))}"
                )
            traces[cid] = trace
        active = [cid for cid in traces if state.scheduler.status(cid) in ACTIVE]
        for decision in decide(traces, active, rule, len(state.rows)):
            state.scheduler.stop(decision.config_id)
            state.store.set_status(decision.config_id, Status.STOPPED.value)
            state.early_stops.append(decision)
            state.store.add_early_stop(decision.config_id, decision.as_dict())
            log.info("experiment %r: %s", state.name, decision.message)

    def _metric_names(self, cid: int) -> set[str]:
        run = self._state.runs[cid]
        return set(run.user_metrics()) | set(run.metrics.row_values) - {SAMPLES}

    def _search_step(self, cid: int, shard: int) -> None:
        """Report the shard to the Optuna search; prune and replace configs as it decides."""
        state = self._state
        assert state.search is not None and state.scheduler is not None
        status = state.scheduler.status(cid)
        if status not in (Status.ONGOING, Status.COMPLETED):
            state.search.finish(cid, None if status == Status.FAILED else self._views.metrics(cid))
            return
        decision, trial = state.search.after_shard(
            cid, shard, self._views.metrics(cid), last=status == Status.COMPLETED
        )
        if decision.prune:
            self._control.set(cid, "stop")
            self._file_log.info(f"config {cid}: pruned by RFOptuna after shard {shard}")
        if decision.replacement is not None:
            new_id = state.take_id()
            (leaf,) = expand([decision.replacement], 0)
            self._persistence.register(validate(leaf, new_id))
            state.search.bind_replacement(new_id, trial)
            self._file_log.info(f"config {new_id}: started by RFOptuna in place of config {cid}")
