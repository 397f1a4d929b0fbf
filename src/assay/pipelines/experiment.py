"""`Experiment.run_evals`: many eval configs over one dataset, shard by shard, with live estimates.

The loop: expand the config group into leaves, shuffle the dataset into shards with the seed,
then repeatedly give the next shard to the least advanced active config (fair round-robin). After
each shard the config's metrics are recomputed with confidence intervals, its rows are already
in the store, and the table is refreshed. Between shards, queued interactive operations (stop,
resume, delete, clone-and-modify) are applied.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from assay.errors import AssayError, ConfigError, ModelError
from assay.pipelines.batch import _columns, run_batch
from assay.pipelines.control_panel import ControlServer, panel_html
from assay.pipelines.data import dataset_fingerprint, dataset_rows, shard_plan
from assay.pipelines.display import ConfigRow, LiveView, to_html, to_markdown
from assay.pipelines.early_stop import EarlyStop, MetricTrace, StopDecision, decide
from assay.pipelines.engines import (
    EngineFactory,
    EnginePool,
    actor_options,
    local_engine,
    ray_engines,
)
from assay.pipelines.eval_config import EvalConfig, apply_changes, expand, validate
from assay.pipelines.experiment_log import ExperimentLog, check_resources
from assay.pipelines.experiment_table import export_frame, paired_scores, results_table
from assay.pipelines.fingerprint import fingerprint
from assay.pipelines.headers import config_headers
from assay.pipelines.online import SAMPLES, ConfigMetrics, batch_entries
from assay.pipelines.optuna_search import OptunaSearch
from assay.pipelines.resources import SharedResources
from assay.pipelines.restore import rebuild_clone, restore_shards
from assay.pipelines.scheduler import ACTIVE, ShardScheduler, Status
from assay.pipelines.store import ExperimentStore, is_plain_json
from assay.stats.online import Estimate, paired_difference
from assay.util.redact import find_secrets, redact, scrub, scrub_value

log = logging.getLogger(__name__)

Results = dict[int, tuple[dict[str, list[Any]], dict[str, dict[str, Any]]]]
"""config id -> (processed rows as columns, metrics), as RapidFire's run_evals returns."""
ShardCallback = Callable[["Experiment", int, int], None]
RAPIDFIRE_TRACKERS = ("RF_MLFLOW_ENABLED", "RF_TENSORBOARD_ENABLED", "RF_TRACKIO_ENABLED")
"""RapidFire's metric-logger switches, which assay answers with a warning."""


class Experiment:
    """A named set of eval runs whose rows, metrics and configs live in ``output_dir``."""

    def __init__(
        self,
        name: str | None = None,
        mode: str = "evals",
        *,
        experiment_name: str | None = None,
        experiment_path: str | Path | None = None,
        num_cpus: int | None = None,
        num_gpus: int | None = None,
        output_dir: str | Path | None = None,
        display: str = "auto",
        max_loaded_engines: int = 2,
        cache_responses: bool = True,
        executor: str = "local",
        replicas: int | None = None,
        gpus_per_replica: float | None = None,
        ray_address: str | None = None,
    ) -> None:
        """The experiment's files go to ``output_dir``, else ``experiment_path/<name>``, else
        ``assay_experiments/<name>``. num_cpus / num_gpus (as RapidFire's) cap what run_evals may
        ask for and are checked against the machine.

        executor="ray" runs each model on a pool of Ray replicas (`replicas`, default one per
        GPU; `gpus_per_replica`; `ray_address`, default a local Ray instance), shared by every
        config of that model; one model's pool is loaded at a time."""
        name = name or experiment_name
        if not name:
            raise ConfigError("Experiment needs a name, e.g. Experiment('gsm8k-fewshot')")
        if mode != "evals":
            raise ConfigError(f"Experiment mode {mode!r} is not supported; assay runs 'evals'")
        self.name = name
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name)
        base = Path(experiment_path) if experiment_path else Path("assay_experiments")
        self.output_dir = Path(output_dir) if output_dir else base / safe
        self.num_cpus, self.num_gpus = check_resources(num_cpus, num_gpus)
        self._log = ExperimentLog(self.output_dir / "experiment.log", name)
        trackers = [v for v in RAPIDFIRE_TRACKERS if os.environ.get(v, "").lower() in ("1", "true")]
        if trackers:
            log.warning(
                "experiment %r: %s asks RapidFire to log to MLflow/TensorBoard/Trackio; assay "
                "does not: results are in %s (experiment.sqlite, export())",
                name,
                ", ".join(trackers),
                self.output_dir,
            )
        self._ended = False
        self._control: ControlServer | None = None
        self.display = display
        self.max_loaded_engines = max_loaded_engines
        self.cache_responses = cache_responses
        if executor not in ("local", "ray"):
            raise ConfigError(f"Experiment executor={executor!r}: choose 'local' or 'ray'")
        self.executor = executor
        self._ray_options: dict[str, Any] = {
            "replicas": replicas,
            "gpus_per_replica": gpus_per_replica,
            "address": ray_address,
        }
        self.max_error_rate = 1.0
        """Share of failed rows above which a config fails (set by run_evals)."""
        self._early_stop: EarlyStop | None = None
        self.resources = SharedResources()
        """Indexes, embeddings and example stores shared by configs (``resources.builds``)."""
        self.engines: EnginePool | None = None
        self._store: ExperimentStore | None = None
        self._lock = threading.RLock()
        self._pending: list[Callable[[], None]] = []
        self._running = False
        self._thread: threading.Thread | None = None
        self._outcome: Results | BaseException | None = None
        self._reset_state()

    def _reset_state(self) -> None:
        self._rows: list[dict[str, Any]] = []
        self._shards: list[list[int]] = []
        self._configs: dict[int, EvalConfig] = {}
        self._metrics: dict[int, ConfigMetrics] = {}
        self._records: dict[int, list[dict[str, Any]]] = {}
        self._seconds: dict[int, float] = {}
        self._failures: dict[int, AssayError] = {}
        self._first_error: dict[int, tuple[int, str]] = {}
        """config id -> (row index, message) of its first failed row."""
        self._final: dict[int, dict[str, dict[str, Any]]] = {}
        self._built: set[int] = set()
        self._secrets: set[str] = set()
        self._scheduler: ShardScheduler | None = None
        self._search: OptunaSearch | None = None
        self._next_id = 1
        self.early_stops: list[StopDecision] = []
        """The configs early stopping stopped, each with the comparison that decided it."""

    # -- running ---------------------------------------------------------------------------
    def run_evals(
        self,
        config_group: Any,
        dataset: Any,
        num_shards: int = 4,
        seed: int = 42,
        num_actors: int | None = None,
        gpus_per_actor: float | None = None,
        cpus_per_actor: float | None = None,
        *,
        resume: bool = True,
        on_shard_complete: ShardCallback | None = None,
        max_error_rate: float = 1.0,
        early_stop: EarlyStop | None = None,
    ) -> Results:
        """Evaluate every leaf config of `config_group` on `dataset`; see the module docstring.

        num_actors / gpus_per_actor / cpus_per_actor: Ray replicas per model and their
        resources with executor="ray" (as RapidFire's actors), checked against the
        experiment's num_cpus / num_gpus; the local executor, where configs take turns in this
        process, says so in a warning and runs as usual. resume: continue from the
        completed shards stored under ``output_dir`` (False starts over).
        on_shard_complete(experiment, config_id, shard) runs after every shard: the place for
        interactive control.
        max_error_rate: a config fails, with its first row error, once more than this share of
        its rows so far failed (checked after every shard); whatever the setting, a config
        whose rows all failed fails. Failed rows are recorded and counted either way.
        early_stop: ``EarlyStop("Accuracy")`` stops, after every shard, the configs that an
        anytime-valid comparison shows to be beaten (see assay.pipelines.early_stop); each
        decision is logged and kept in ``early_stops``, stopped configs keep their results.
        """
        if early_stop is not None and not isinstance(early_stop, EarlyStop):
            raise ConfigError(
                f"run_evals early_stop must be an EarlyStop(metric, ...), got "
                f"{type(early_stop).__name__}"
            )
        self._early_stop = early_stop
        if isinstance(max_error_rate, bool) or not (
            isinstance(max_error_rate, int | float) and 0.0 <= max_error_rate <= 1.0
        ):
            raise ConfigError(
                f"run_evals max_error_rate={max_error_rate!r}: give a share of rows between 0 "
                "and 1 (e.g. 0.05 fails a config once more than 5% of its rows failed)"
            )
        self.max_error_rate = float(max_error_rate)
        if self._ended:
            raise ConfigError(
                f"experiment {self.name!r} has ended; create a new Experiment to run again"
            )
        self._ray_options.update(
            actor_options(
                self.executor,
                num_actors,
                gpus_per_actor,
                cpus_per_actor,
                num_cpus=self.num_cpus,
                num_gpus=self.num_gpus,
            )
        )
        self._prepare(config_group, dataset, num_shards, seed, resume)
        self._log.info(
            f"run_evals: {len(self._configs)} config(s), {len(self._rows)} rows, "
            f"{num_shards} shards, seed {seed}"
        )
        return self.continue_evals(on_shard_complete)

    def start_evals(self, *args: Any, **kwargs: Any) -> None:
        """`run_evals` in a background thread; control it meanwhile, then call `wait()`."""
        if self._thread is not None and self._thread.is_alive():
            raise ConfigError(f"experiment {self.name!r} is already running")

        def target() -> None:
            try:
                self._outcome = self.run_evals(*args, **kwargs)
            except BaseException as exc:
                self._outcome = exc

        self._outcome = None
        self._thread = threading.Thread(target=target, name=f"assay-{self.name}", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> Results:
        """The results of `start_evals` once it finishes (its exception, if it failed)."""
        if self._thread is None:
            raise ConfigError("wait() needs a run started with start_evals()")
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"experiment {self.name!r} still running after {timeout} s")
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        assert self._outcome is not None
        return self._outcome

    def continue_evals(self, on_shard_complete: ShardCallback | None = None) -> Results:
        """Run the active configs of the last `run_evals` (after resume or clone) to the end."""
        if self._scheduler is None:
            raise ConfigError("continue_evals() needs a previous run_evals() on this experiment")
        view = LiveView(self.display, title=f"experiment {self.name}")
        self._running = True
        try:
            if view.mode == "notebook":
                from IPython.display import display

                display(self.control_panel())
            self._apply_pending()
            view.update(self.status_rows())
            assert self.engines is not None, "run_evals builds the engine pool with the scheduler"
            while True:
                loaded = self.engines.loaded_keys[-1] if self.engines.loaded_keys else None
                pick = self._scheduler.next(loaded)
                if pick is None:
                    break
                config_id, shard = pick
                self._run_shard(config_id, shard)
                self._stop_beaten()
                if self._search is not None:
                    self._search_step(config_id, shard)
                view.update(self.status_rows())
                if on_shard_complete is not None:
                    on_shard_complete(self, config_id, shard)
                self._apply_pending()
        finally:
            self._running = False
            view.close()
        statuses = self._statuses()
        if self._configs and all(s == Status.FAILED for s in statuses.values()):
            raise self._failures[min(self._failures)]
        failed = sorted(cid for cid, s in statuses.items() if s == Status.FAILED)
        if failed:
            log.warning(
                "experiment %r: %d of %d configs failed (%s) and are left out of the results; "
                "experiment.errors() says why",
                self.name,
                len(failed),
                len(statuses),
                ", ".join(map(str, failed)),
            )
        return self.results()

    def _search_step(self, cid: int, shard: int) -> None:
        """Report the shard to the Optuna search; prune and replace configs as it decides."""
        assert self._search is not None and self._scheduler is not None
        status = self._scheduler.status(cid)
        if status not in (Status.ONGOING, Status.COMPLETED):
            self._search.finish(cid, None if status == Status.FAILED else self.metrics(cid))
            return
        decision, trial = self._search.after_shard(
            cid, shard, self.metrics(cid), last=status == Status.COMPLETED
        )
        if decision.prune:
            self._set(cid, "stop")
            self._log.info(f"config {cid}: pruned by RFOptuna after shard {shard}")
        if decision.replacement is not None:
            new_id = self._take_id()
            (leaf,) = expand([decision.replacement], 0)
            self._register(validate(leaf, new_id))
            self._search.bind_replacement(new_id, trial)
            self._log.info(f"config {new_id}: started by RFOptuna in place of config {cid}")

    def _prepare(
        self, config_group: Any, dataset: Any, num_shards: int, seed: int, resume: bool
    ) -> None:
        self._reset_state()
        self._rows = dataset_rows(dataset)
        order, self._shards = shard_plan(len(self._rows), num_shards, seed)
        leaves = expand(config_group, seed)
        if not leaves:
            raise ConfigError("run_evals: the config group expands to no configs")
        if self._store is None:
            self._store = ExperimentStore(self.output_dir / "experiment.sqlite")
        meta = {
            "name": self.name,
            "dataset_fingerprint": dataset_fingerprint(self._rows),
            "num_rows": len(self._rows),
            "num_shards": num_shards,
            "seed": seed,
        }
        stored = self._store.meta()
        if resume and stored:
            changed = [k for k in meta if stored.get(k) != meta[k]]
            if changed:
                raise ConfigError(
                    f"experiment {self.name!r} in {self.output_dir} was run with other "
                    f"{', '.join(changed)}; pass resume=False to start over, or use another name"
                )
        elif stored:
            self._store.clear()
        self._store.set_meta({**meta, "permutation": order})
        if self.engines is None:
            cache_dir = self.output_dir if self.cache_responses else None
            self.engines = EnginePool(cache_dir, *self._engine_plan())
        self._scheduler = ShardScheduler(num_shards)
        stored_configs = self._store.configs()
        known = {c["fingerprint"]: c for c in reversed(stored_configs)}
        self._next_id = max((c["config_id"] for c in stored_configs), default=0) + 1
        ids = []
        for leaf in leaves:
            previous = known.pop(fingerprint(leaf), None)
            config_id = previous["config_id"] if previous else self._take_id()
            self._register(validate(leaf, config_id), previous)
            ids.append(config_id)
        self._restore_clones(stored_configs)
        self.early_stops = [
            StopDecision.from_dict(d)
            for d in self._store.early_stops()
            if d["config_id"] in self._configs
        ]
        self._search = config_group if isinstance(config_group, OptunaSearch) else None
        if self._search is not None:
            if len(ids) != self._search.n_initial:
                raise ConfigError(
                    f"RFOptuna: {self._search.n_initial - len(ids)} of the first configs keep more "
                    "reranked documents (top_n) than they retrieve (k); narrow the search space"
                )
            self._search.bind(ids)

    def _restore_clones(self, stored_configs: list[dict[str, Any]]) -> None:
        """Re-register the stored clones of this run's configs (by id, so parents come first)."""
        for stored in stored_configs:
            if stored["parent_id"] is None or stored["config_id"] in self._configs:
                continue
            try:
                clone = rebuild_clone(self._configs, stored)
            except ConfigError as exc:
                log.warning(
                    "experiment %r: clone %d of config %d is not resumed (%s); clone it again "
                    "with clone_modify",
                    self.name,
                    stored["config_id"],
                    stored["parent_id"],
                    exc,
                )
                continue
            self._register(clone, stored)

    def _engine_plan(self) -> tuple[int, EngineFactory]:
        """How many engines stay loaded, and how an engine is built."""
        if self.executor == "local":
            return self.max_loaded_engines, local_engine
        # Each model's pool takes the whole cluster: a second one would wait for resources.
        return 1, ray_engines(**self._ray_options)

    def _take_id(self) -> int:
        with self._lock:
            config_id, self._next_id = self._next_id, self._next_id + 1
            return config_id

    def _register(
        self,
        config: EvalConfig,
        previous: dict[str, Any] | None = None,
        changes: dict[str, Any] | None = None,
    ) -> None:
        """Add a config to this run: new (`previous` None; a clone's storable `changes`), or
        as stored, with its completed shards restored."""
        assert self._store is not None and self._scheduler is not None
        cid = config.config_id
        self._secrets |= find_secrets(config.model.knob_params())
        self._configs[cid] = config
        self._metrics[cid] = ConfigMetrics(
            len(self._rows),
            config.settings,
            config.compute_metrics_fn,
            config.accumulate_metrics_fn,
            where=f"config {cid}",
        )
        self._records[cid] = []
        status = Status(previous["status"]) if previous else Status.NEW
        if status == Status.FAILED:
            status = Status.NEW
        if previous is None:
            self._store.add_config(
                cid, config.fingerprint, config.knobs(), config.parent_id, changes
            )
        completed = self._store.completed_shards(cid)
        completed = completed[
            : next((i for i, s in enumerate(completed) if s != i), len(completed))
        ]
        self._store.discard_partial(cid, completed)
        if completed:
            self._restore(cid, completed)
            status = Status.ONGOING if status == Status.NEW else status
        self._scheduler.add(cid, config.model.engine_key(), len(completed), status)
        self._store.set_status(cid, self._scheduler.status(cid).value)

    def _restore(self, cid: int, completed: list[int]) -> None:
        assert self._store is not None
        restored = restore_shards(self._store, cid, completed, self._metrics[cid])
        self._records[cid] = restored.records
        self._seconds[cid] = restored.seconds
        if restored.first_error is not None:
            self._first_error[cid] = restored.first_error

    def _ensure_built(self, config: EvalConfig) -> None:
        if config.config_id in self._built:
            return
        for part in (config.rag, config.prompt_manager):
            if part is not None:
                part.build(self.resources)
        self._built.add(config.config_id)

    def _run_shard(self, cid: int, shard: int) -> None:
        assert self._store is not None and self._scheduler is not None and self.engines
        config, metrics = self._configs[cid], self._metrics[cid]
        started = time.perf_counter()
        rows = self._shards[shard]
        shard_errors = 0
        try:
            self._ensure_built(config)
            for b, start in enumerate(range(0, len(rows), config.batch_size)):
                indices = rows[start : start + config.batch_size]
                where = f"config {cid}, shard {shard}, batch {b}"
                outcome = run_batch(
                    config, [self._rows[i] for i in indices], indices, self.engines, where
                )
                stored = [
                    replace(row, error=scrub(row.error, self._secrets) if row.error else None)
                    for row in outcome.stored_rows(cid, shard)
                ]
                failed = next(((r.row_index, r.error) for r in stored if r.error), None)
                if failed is not None and cid not in self._first_error:
                    self._first_error[cid] = failed
                entries = batch_entries(outcome.metrics, len(outcome.scored))
                self._store.write_batch(cid, shard, b, stored, entries)
                n_errors = len(indices) - len(outcome.scored)
                shard_errors += n_errors
                metrics.add_batch(
                    len(outcome.scored),
                    n_errors,
                    entries,
                    outcome.row_scores,
                    [outcome.row_indices[i] for i in outcome.scored],
                )
                self._records[cid].extend(outcome.records[i] for i in outcome.scored)
            metrics.end_shard()
            # Before the shard counts as complete: a resumed run redoes it.
            self._check_errors(cid)
            seconds = time.perf_counter() - started
            self._seconds[cid] = self._seconds.get(cid, 0.0) + seconds
            self._store.complete_shard(cid, shard, len(rows), shard_errors, seconds)
            self._scheduler.complete(cid, shard)
            self._final.pop(cid, None)
            if self._scheduler.status(cid) == Status.COMPLETED:
                self._user_metrics(cid)  # a failing end-of-run compute_metrics_fn fails the config
            snapshot = self.metrics(cid) if metrics.live else {}
            self._store.record_metrics(cid, shard + 1, metrics.samples, snapshot)
        except AssayError as exc:
            self._failures[cid] = exc
            self._scheduler.fail(cid)
            log.error("experiment %r: %s", self.name, scrub(str(exc), self._secrets))
        error = self._failures.get(cid)
        message = scrub(str(error), self._secrets) if error else None
        status = self._scheduler.status(cid).value
        self._store.set_status(cid, status, message)
        self._log.info(
            f"config {cid}: shard {shard} done, {metrics.samples} rows scored, {status}"
            + (f" ({message})" if message else "")
        )

    def control_server(self) -> ControlServer:
        """The loopback HTTP endpoint that stops, resumes, deletes and clones configs while
        run_evals runs (started on first use; see pipelines.control_panel)."""
        if self._control is None:
            self._control = ControlServer(self)
        return self._control

    def control_panel(self) -> Any:
        """The notebook control panel (an IPython HTML object; run_evals shows it in notebooks)."""
        from IPython.display import HTML

        return HTML(panel_html(self.control_server(), sorted(self._configs)))

    def get_log_file_path(self, log_type: str | None = None) -> Path:
        """The experiment's log file (RapidFire's ``log_type`` "main"/"experiment" is the same)."""
        if log_type is not None and log_type.lower() not in ("main", "experiment"):
            raise ConfigError(
                f"get_log_file_path log_type={log_type!r}: assay keeps one log, 'experiment'"
            )
        return self._log.path

    def cancel_current(self) -> None:
        """Stop every active config after its shard in flight (resume() picks any up again)."""
        for cid, status in self._statuses().items() if self._scheduler else ():
            if status in (Status.NEW, Status.ONGOING):
                self.stop(cid)
        self._log.info("cancel_current: every active config stops after its shard in flight")

    def end(self) -> None:
        """Release engines, indexes and files; results and the store on disk stay readable."""
        if self._thread is not None and self._thread.is_alive():
            raise ConfigError(
                f"experiment {self.name!r} is still running; cancel_current() and wait() first"
            )
        if self.engines is not None:
            self.engines.close()
            self.engines = None
        if self._control is not None:
            self._control.close()
            self._control = None
        self._log.info("experiment ended")
        self._log.close()
        self._ended = True

    def _check_errors(self, cid: int) -> None:
        """Fail the config when its rows failed beyond max_error_rate (see ConfigMetrics)."""
        why = self._metrics[cid].error_budget_exceeded(self.max_error_rate)
        if why is None:
            return
        row, message = self._first_error[cid]
        raise ModelError(
            f"config {cid}: {why}; first error, row {row}: {message}. Its failed shard is not "
            "kept: fix the cause and run again to redo it (completed shards are kept)"
        )

    def _stop_beaten(self) -> None:
        """Apply the early-stopping rule after a shard (see assay.pipelines.early_stop)."""
        rule = self._early_stop
        if rule is None:
            return
        assert self._scheduler is not None and self._store is not None
        traces: dict[int, MetricTrace] = {}
        for cid, status in self._statuses().items():
            if status in (Status.DELETED, Status.FAILED) or not self._metrics[cid].samples:
                continue
            trace = self._metrics[cid].trace(rule.metric)
            if trace is None:
                raise ConfigError(
                    f"early_stop metric {rule.metric!r}: config {cid} has no such metric; "
                    f"its metrics: {sorted(self._metric_names(cid))}"
                )
            traces[cid] = trace
        active = [cid for cid in traces if self._scheduler.status(cid) in ACTIVE]
        for decision in decide(traces, active, rule, len(self._rows)):
            self._scheduler.stop(decision.config_id)
            self._store.set_status(decision.config_id, Status.STOPPED.value)
            self.early_stops.append(decision)
            self._store.add_early_stop(decision.config_id, decision.as_dict())
            log.info("experiment %r: %s", self.name, decision.message)

    def _metric_names(self, cid: int) -> set[str]:
        metrics = self._metrics[cid]
        return set(self._user_metrics(cid)) | set(metrics.row_values) - {SAMPLES}

    # -- interactive control ---------------------------------------------------------------
    def _queue(self, op: Callable[[], None]) -> None:
        with self._lock:
            if self._running:
                self._pending.append(op)
                return
        op()

    def _apply_pending(self) -> None:
        with self._lock:
            ops, self._pending = self._pending, []
        for op in ops:
            op()

    def _set(self, config_id: int, action: str) -> None:
        def op() -> None:
            assert self._scheduler is not None and self._store is not None
            getattr(self._scheduler, action)(config_id)
            self._store.set_status(config_id, self._scheduler.status(config_id).value)

        self._check_known(config_id)
        self._queue(op)

    def _check_known(self, config_id: int) -> None:
        if config_id not in self._configs:
            raise ConfigError(
                f"experiment {self.name!r} has no config {config_id}; ids: {sorted(self._configs)}"
            )

    def stop(self, config_id: int) -> None:
        """Stop a config after its shard in flight; its results so far are kept."""
        self._set(config_id, "stop")

    def resume(self, config_id: int) -> None:
        """Resume a stopped config from its next shard."""
        self._set(config_id, "resume")

    def delete(self, config_id: int) -> None:
        """Stop a config and leave it out of results and tables."""
        self._set(config_id, "delete")

    def clone_modify(self, config_id: int, changes: dict[str, Any]) -> int:
        """Start a new config from `config_id` with `changes` merged in; returns its id.

        Changes merge key by key, into model configs, RAG specs and prompt managers too:
        ``{"batch_size": 8, "pipeline": {"sampling_params": {"temperature": 0.7}}}``; RapidFire's
        clone payload works as well: ``{"pipeline_type": "vllm", "sampling_params":
        {"temperature": 0.7}, "rag_config": {"search_cfg": {"k": 3}}}``. The clone shares
        indexes and engines with its parent when their settings did not change.

        The changes are stored so that an interrupted experiment resumes the clone too, when
        they are plain values (numbers, strings, lists, dicts) without secrets; a clone whose
        changes hold functions, objects or secrets is left out of a resumed run, with a warning.
        """
        self._check_known(config_id)
        parent = self._configs[config_id]
        new_id = self._take_id()
        clone = validate(apply_changes(parent.leaf, changes), new_id, parent_id=config_id)
        storable = is_plain_json(changes) and redact(changes) == changes
        kept = dict(changes) if storable else None
        self._queue(lambda: self._register(clone, changes=kept))
        return new_id

    # -- results ---------------------------------------------------------------------------
    def _statuses(self) -> dict[int, Status]:
        assert self._scheduler is not None
        return {cid: self._scheduler.status(cid) for cid in self._configs}

    def metrics(self, config_id: int) -> dict[str, dict[str, Any]]:
        """The config's metrics now: ``run_id``, ``model_name``, RapidFire's knob columns
        (``search_cfg``, ``reranker_cfg``, ``sampling_params``, ...; see pipelines.headers),
        counts, then user metrics with intervals."""
        self._check_known(config_id)
        config, state = self._configs[config_id], self._metrics[config_id]
        user = self._user_metrics(config_id)
        seconds = self._seconds.get(config_id, 0.0)
        out: dict[str, dict[str, Any]] = {
            "run_id": {"value": config_id},
            "model_name": {"value": config.model.model_name},
            **{
                k: {"value": scrub_value(v, self._secrets)}
                for k, v in config_headers(config.model, config.leaf).items()
            },
            SAMPLES: {"value": state.samples},
            "Generation Errors": {"value": state.errors},
            "Processing Time": {"value": seconds},
            "Samples Per Second": {"value": state.samples / seconds if seconds else 0.0},
        }
        out.update({k: v for k, v in user.items() if k != SAMPLES})
        return out

    def _user_metrics(self, config_id: int) -> dict[str, dict[str, Any]]:
        state = self._metrics[config_id]
        if state.live:
            return state.current()
        if config_id not in self._final:
            self._final[config_id] = state.final(_columns(self._records[config_id]))
        return self._final[config_id]

    def results(self) -> Results:
        """{config id: (rows as columns, metrics)} for completed, stopped and ongoing configs."""
        out: Results = {}
        for cid, status in self._statuses().items():
            if status in (Status.DELETED, Status.FAILED):
                continue
            out[cid] = (_columns(self._records[cid]), self.metrics(cid))
        return out

    def errors(self) -> dict[int, str]:
        """Why each failed config failed."""
        return {cid: scrub(str(exc), self._secrets) for cid, exc in self._failures.items()}

    def status_rows(self) -> list[ConfigRow]:
        """One table row per config that is not deleted."""
        rows = []
        for cid, status in self._statuses().items():
            if status == Status.DELETED:
                continue
            state = self._metrics[cid]
            assert self._scheduler is not None
            shown = {} if status == Status.FAILED else self._shown_metrics(cid, status)
            rows.append(
                ConfigRow(
                    config_id=cid,
                    status=status.value,
                    shards_done=self._scheduler.configs[cid].shards_done,
                    num_shards=self._scheduler.num_shards,
                    n=state.samples,
                    population=len(self._rows),
                    errors=state.errors,
                    seconds=self._seconds.get(cid, 0.0),
                    metrics=shown,
                    knobs=self._configs[cid].knobs(),
                )
            )
        return rows

    def _shown_metrics(self, cid: int, status: Status) -> dict[str, dict[str, Any]]:
        if self._metrics[cid].live or status in (Status.COMPLETED, Status.STOPPED):
            return self._user_metrics(cid)
        return {}

    def to_markdown(self) -> str:
        """The status table as Markdown."""
        return to_markdown(self.status_rows())

    def _repr_html_(self) -> str:
        return to_html(self.status_rows())

    def metrics_history(self, config_id: int) -> list[dict[str, Any]]:
        """The config's metrics after each of its shards (how the estimate converged)."""
        assert self._store is not None
        return self._store.metrics_history(config_id)

    def results_table(self) -> list[dict[str, Any]]:
        """Tidy rows keyed by (config_id, row_index): prompt, output, error, one column per score."""
        return results_table(self._store)

    def to_pandas(self) -> Any:
        """`results_table()` as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.results_table())

    def export(self, path: str | Path) -> Path:
        """Write `results_table()` to .csv, .jsonl or .parquet (by suffix)."""
        return export_frame(self.to_pandas(), path)

    def compare(self, config_a: int, config_b: int, metric: str) -> Estimate:
        """mean(a) - mean(b) of a per-row metric on the rows both configs scored, with its interval."""
        assert self._store is not None
        self._check_known(config_a)
        self._check_known(config_b)
        scores_a, scores_b = paired_scores(self._store, config_a, config_b, metric)
        entry = self.metrics(config_a).get(metric, {})
        return paired_difference(
            scores_a,
            scores_b,
            value_range=tuple(entry.get("value_range") or (0.0, 1.0)),
            population=len(self._rows),
            settings=self._configs[config_a].settings,
        )


def run_evals(
    config_group: Any,
    dataset: Any,
    num_shards: int = 4,
    seed: int = 42,
    *,
    name: str = "run_evals",
    output_dir: str | Path | None = None,
    display: str = "auto",
    resume: bool = True,
    on_shard_complete: ShardCallback | None = None,
    max_error_rate: float = 1.0,
    early_stop: EarlyStop | None = None,
) -> Results:
    """One-call form: ``Experiment(name, output_dir=..., display=...).run_evals(...)``."""
    experiment = Experiment(name, output_dir=output_dir, display=display)
    return experiment.run_evals(
        config_group,
        dataset,
        num_shards,
        seed,
        resume=resume,
        on_shard_complete=on_shard_complete,
        max_error_rate=max_error_rate,
        early_stop=early_stop,
    )
