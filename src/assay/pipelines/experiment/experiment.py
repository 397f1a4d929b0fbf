"""`Experiment.run_evals`: many eval configs over one dataset, shard by shard, with live estimates.

The loop: expand the config group into leaves, shuffle the dataset into shards with the seed,
then repeatedly give the next shard to the least advanced active config (fair round-robin). After
each shard the config's metrics are recomputed with confidence intervals, its rows are already
in the store, and the table is refreshed. Between shards, queued interactive operations (stop,
resume, delete, clone-and-modify) are applied.

`Experiment` is the public face; collaborators it owns do its jobs over one shared `RunState`:
scheduling (`shard_runner`), control (`control`), the store (`persistence`)
and tables and numbers (`views`). Composition rather than mixins: each collaborator
states what it reads and calls; mixins would share every attribute and hide which job does what.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assay.errors import ConfigError
from assay.pipelines.experiment.control import ExperimentControl
from assay.pipelines.experiment.control_panel import ControlServer, panel_html
from assay.pipelines.experiment.display import ConfigRow, LiveView, to_html, to_markdown
from assay.pipelines.experiment.log import (
    ExperimentLog,
    check_resources,
    log,
    warn_rapidfire_trackers,
)
from assay.pipelines.experiment.persistence import ExperimentPersistence
from assay.pipelines.experiment.shard_runner import (
    BackgroundRun,
    ShardRunner,
    check_early_stop,
    check_error_rate,
)
from assay.pipelines.experiment.state import RunState
from assay.pipelines.experiment.table import export_frame, results_table
from assay.pipelines.experiment.views import ExperimentViews, Results
from assay.pipelines.rag.resources import SharedResources
from assay.pipelines.shards.early_stop import EarlyStop, StopDecision
from assay.pipelines.shards.engines import (
    EngineFactory,
    EnginePool,
    actor_options,
    local_engine,
    ray_engines,
)
from assay.pipelines.shards.scheduler import Status
from assay.pipelines.shards.store import ExperimentStore
from assay.run.settings import executor_settings, unused_on_local
from assay.stats.online import Estimate

ShardCallback = Callable[["Experiment", int, int], None]


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
        **executor: Any,
    ) -> None:
        """The experiment's files go to ``output_dir``, else ``experiment_path/<name>``, else
        ``assay_experiments/<name>``. num_cpus / num_gpus (as RapidFire's) cap what run_evals may
        ask for and are checked against the machine.

        The executor keywords are `assay run`'s executor settings, with their defaults and
        checks (assay.run.settings.executor_names: executor, replicas, gpus_per_replica,
        ray_address). executor="ray" runs each model on a pool of Ray replicas (`replicas`,
        default one per GPU; `gpus_per_replica`; `ray_address`, default a local Ray instance),
        shared by every config of that model; one model's pool is loaded at a time."""
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
        warn_rapidfire_trackers(name, self.output_dir)
        self._ended = False
        self._control_server: ControlServer | None = None
        self.display = display
        self.max_loaded_engines = max_loaded_engines
        self.cache_responses = cache_responses
        placement = executor_settings(executor, "Experiment")
        for unused in unused_on_local(placement):
            raise ConfigError(
                f"Experiment {unused}={placement[unused]!r} applies to executor='ray' only; "
                "pass executor='ray' too."
            )
        self.executor: str = placement.pop("executor")
        self._ray_options: dict[str, Any] = placement
        """ray_engines' keywords: the Ray pool's settings, then run_evals' actor options."""
        self.max_error_rate = 1.0
        """Share of failed rows above which a config fails (set by run_evals)."""
        self._early_stop: EarlyStop | None = None
        self.resources = SharedResources()
        """Indexes, embeddings and example stores shared by configs (``resources.builds``)."""
        self.engines: EnginePool | None = None
        self._background = BackgroundRun(name)
        self._state = RunState(name)
        self._views = ExperimentViews(self._state)
        self._persistence = ExperimentPersistence(self._state, self.output_dir)
        self._control = ExperimentControl(self._state, self._persistence, self._log)
        self._runner = ShardRunner(
            self._state,
            views=self._views,
            control=self._control,
            persistence=self._persistence,
            resources=self.resources,
            file_log=self._log,
        )

    @property
    def early_stops(self) -> list[StopDecision]:
        """The configs early stopping stopped, each with the comparison that decided it."""
        return self._state.early_stops

    @property
    def _store(self) -> ExperimentStore | None:
        return self._state.store

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
        anytime-valid comparison shows to be beaten (see assay.pipelines.shards.early_stop); each
        decision is logged and kept in ``early_stops``, stopped configs keep their results.
        """
        self._early_stop = check_early_stop(early_stop)
        self.max_error_rate = check_error_rate(max_error_rate)
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
        leaves = self._persistence.open_run(config_group, dataset, num_shards, seed, resume)
        if self.engines is None:
            cache_dir = self.output_dir if self.cache_responses else None
            self.engines = EnginePool(cache_dir, *self._engine_plan())
        self._persistence.add_configs(leaves, config_group, num_shards)
        self._log.info(
            f"run_evals: {len(self._state.runs)} config(s), {len(self._state.rows)} rows, "
            f"{num_shards} shards, seed {seed}"
        )
        return self.continue_evals(on_shard_complete)

    def start_evals(self, *args: Any, **kwargs: Any) -> None:
        """`run_evals` in a background thread; control it meanwhile, then call `wait()`."""
        self._background.start(lambda: self.run_evals(*args, **kwargs))

    def wait(self, timeout: float | None = None) -> Results:
        """The results of `start_evals` once it finishes (its exception, if it failed)."""
        return self._background.wait(timeout)

    def continue_evals(self, on_shard_complete: ShardCallback | None = None) -> Results:
        """Run the active configs of the last `run_evals` (after resume or clone) to the end."""
        if self._state.scheduler is None:
            raise ConfigError("continue_evals() needs a previous run_evals() on this experiment")
        view = LiveView(self.display, title=f"experiment {self.name}")

        def after_shard(config_id: int, shard: int) -> None:
            view.update(self.status_rows())
            if on_shard_complete is not None:
                on_shard_complete(self, config_id, shard)
            self._control.apply_pending()

        self._control.running = True
        try:
            if view.mode == "notebook":
                from IPython.display import display

                display(self.control_panel())
            self._control.apply_pending()
            view.update(self.status_rows())
            assert self.engines is not None, "run_evals builds the engine pool with the scheduler"
            self._runner.run(self.engines, self.max_error_rate, self._early_stop, after_shard)
        finally:
            self._control.running = False
            view.close()
        statuses = self._state.statuses()
        if self._state.runs and all(s == Status.FAILED for s in statuses.values()):
            failures = self._state.failures()
            raise failures[min(failures)]
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

    def _engine_plan(self) -> tuple[int, EngineFactory]:
        """How many engines stay loaded, and how an engine is built."""
        if self.executor == "local":
            return self.max_loaded_engines, local_engine
        # Each model's pool takes the whole cluster: a second one would wait for resources.
        return 1, ray_engines(**self._ray_options)

    def get_log_file_path(self, log_type: str | None = None) -> Path:
        """The experiment's log file (RapidFire's ``log_type`` "main"/"experiment" is the same)."""
        if log_type is not None and log_type.lower() not in ("main", "experiment"):
            raise ConfigError(
                f"get_log_file_path log_type={log_type!r}: assay keeps one log, 'experiment'"
            )
        return self._log.path

    def end(self) -> None:
        """Release engines, indexes and files; results and the store on disk stay readable."""
        if self._background.alive:
            raise ConfigError(
                f"experiment {self.name!r} is still running; cancel_current() and wait() first"
            )
        if self.engines is not None:
            self.engines.close()
            self.engines = None
        if self._control_server is not None:
            self._control_server.close()
            self._control_server = None
        self._log.info("experiment ended")
        self._log.close()
        self._ended = True

    # -- interactive control ---------------------------------------------------------------
    def control_server(self) -> ControlServer:
        """The loopback HTTP endpoint that stops, resumes, deletes and clones configs while
        run_evals runs (started on first use; see pipelines.experiment.control_panel)."""
        if self._control_server is None:
            self._control_server = ControlServer(self)
        return self._control_server

    def control_panel(self) -> Any:
        """The notebook control panel (an IPython HTML object; run_evals shows it in notebooks)."""
        from IPython.display import HTML

        return HTML(panel_html(self.control_server(), sorted(self._state.runs)))

    def cancel_current(self) -> None:
        """Stop every active config after its shard in flight (resume() picks any up again)."""
        self._control.cancel_current()

    def stop(self, config_id: int) -> None:
        """Stop a config after its shard in flight; its results so far are kept."""
        self._control.set(config_id, "stop")

    def resume(self, config_id: int) -> None:
        """Resume a stopped config from its next shard."""
        self._control.set(config_id, "resume")

    def delete(self, config_id: int) -> None:
        """Stop a config and leave it out of results and tables."""
        self._control.set(config_id, "delete")

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
        return self._control.clone_modify(config_id, changes)

    # -- results ---------------------------------------------------------------------------
    def metrics(self, config_id: int) -> dict[str, dict[str, Any]]:
        """The config's metrics now: ``run_id``, ``model_name``, RapidFire's knob columns
        (``search_cfg``, ``reranker_cfg``, ``sampling_params``, ...; see pipelines.experiment.headers),
        counts, then user metrics with intervals."""
        return self._views.metrics(config_id)

    def results(self) -> Results:
        """{config id: (rows as columns, metrics)} for completed, stopped and ongoing configs."""
        return self._views.results()

    def errors(self) -> dict[int, str]:
        """Why each failed config failed."""
        return self._views.errors()

    def status_rows(self) -> list[ConfigRow]:
        """One table row per config that is not deleted."""
        return self._views.status_rows()

    def to_markdown(self) -> str:
        """The status table as Markdown."""
        return to_markdown(self.status_rows())

    def _repr_html_(self) -> str:
        return to_html(self.status_rows())

    def metrics_history(self, config_id: int) -> list[dict[str, Any]]:
        """The config's metrics after each of its shards (how the estimate converged)."""
        assert self._state.store is not None
        return self._state.store.metrics_history(config_id)

    def results_table(self) -> list[dict[str, Any]]:
        """Tidy rows keyed by (config_id, row_index): prompt, output, error, one column per score."""
        return results_table(self._state.store)

    def to_pandas(self) -> Any:
        """`results_table()` as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.results_table())

    def export(self, path: str | Path) -> Path:
        """Write `results_table()` to .csv, .jsonl or .parquet (by suffix)."""
        return export_frame(self.to_pandas(), path)

    def compare(self, config_a: int, config_b: int, metric: str) -> Estimate:
        """mean(a) - mean(b) of a per-row metric on the rows both configs scored, with its interval."""
        return self._views.compare(config_a, config_b, metric)


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
