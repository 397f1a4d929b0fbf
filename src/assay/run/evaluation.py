"""The pipeline for benchmark tasks, streamed shard by shard.

The run is planned once (`run_plan.plan_run`: every task checked, its scorers and judges built,
the run's identity, output place and backend arguments fixed) and its data loaded before the
model is built. Then, for each task, shard by shard: docs -> requests -> executor (`answering`;
`agents`, `follow_ups`) -> filters -> judges (`judging`) -> metrics (`scoring`), each stage
returning its values and `shard.TaskStages` assembling them; then the task's aggregates, and its
numbers and samples written as soon as it finishes. The stages live in their own modules (see
docs/architecture.md, "A run's stages"); this one wires them. `evaluate()` (`run.api`) is its
Python entry point."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any

from assay.execution.distributed import launch_rank
from assay.execution.executor import Executor
from assay.execution.progress import CacheCounts, LiveProgress
from assay.execution.seeding import seed_globals, seed_torch
from assay.execution.stats import RunStats, counter_delta, task_batch_sizes
from assay.metrics.base import ScoredMetric
from assay.models.api.budget import spending_limit
from assay.models.api.usage_totals import usage_delta
from assay.models.base import LM
from assay.requests.build import check_images_accepted
from assay.requests.cache import CACHE_FILE, ResponseCache
from assay.requests.doc_result import DocResult
from assay.requests.plan import Capabilities
from assay.results.builder import ResultsBuilder, TaskRecord
from assay.results.layout import OutputPlace, RunFiles
from assay.results.samples import SamplesLog, doc_hash
from assay.results.summary import MetricColumns, task_entry
from assay.results.writer import OutputDir
from assay.run.agents import AgentTally
from assay.run.answering import Answering
from assay.run.backend import backend_class, build_executor, described_model
from assay.run.bill import Bill, Reading, bill_line, earlier_invocations, stopped_by
from assay.run.deferred import DeferredBackend, overlap_enabled
from assay.run.header import run_info
from assay.run.judging import Judges, TaskJudging
from assay.run.lock import RunLock
from assay.run.plan import (
    TaskPlan,
    check_cluster_field,
    cluster_of,
    doc_ids,
    plan_task,
)
from assay.run.resume import check_place, run_files
from assay.run.run_plan import plan_run
from assay.run.settings import RunSettings
from assay.run.shard import TaskStages
from assay.tasks.registry import Resolved
from assay.tasks.runtime_guard import CodeRunRefused, raise_pending, results_written, settle
from assay.tasks.task import Task
from assay.util.terminal import terminal_safe

log = logging.getLogger(__name__)

NOT_LOADED = "all answers from the cache: model not loaded"
"""Said at the end of a run whose every request the response cache answered."""

SHARD_DOCS = 2000
"""Docs per shard: memory stays flat however large a task is."""


class Evaluation:
    """One run over resolved tasks."""

    def __init__(self, resolved: Resolved, settings: RunSettings) -> None:
        self.resolved, self.settings = resolved, settings
        self.plan = plan_run(resolved, settings)
        """What the run fixes before it loads anything (checked settings and tasks, scorers,
        judges, sandbox, identity, output place, backend arguments)."""
        self.tasks, self.scorers = self.plan.tasks, self.plan.scorers
        self.tracked: list[str] = []
        """Where the finished run was logged (one line per --log-to tracker)."""
        self.files: RunFiles | None = None
        """The files the run wrote (None: none)."""
        self.bill: dict[str, Any] | None = None
        """What the run's API requests cost (results.json's `assay.api_usage`; `run.bill`),
        once the run ended; None where they are metered elsewhere (Ray workers)."""
        self._replaces: bool | None = None
        """Whether the run replaces an earlier run's files (--overwrite), once its folder was
        checked with the model's identity (None: not yet)."""

    def load_data(self) -> None:
        """Load every task's dataset and build its first doc (in parallel), before any model is
        built: a wrong split, a too small few-shot pool or a template that breaks on the data
        then fails before the (slow) model load. Only the first doc is built, so the run still
        streams the rest."""
        workers = max(1, min(self.settings.dataset_loading_processes, len(self.tasks)))

        backend = backend_class(self.settings)

        def check(task: Task) -> None:
            first = task.load().first_doc()
            check_cluster_field(task, first)
            if first is not None and backend is not None:
                check_images_accepted(task.name, first, backend.__name__, backend.accepts_images)

        if workers == 1:
            for task in self.tasks:
                check(task)
            return
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(check, self.tasks))

    def run(self, model: LM | None = None, executor: Executor | None = None) -> dict[str, Any]:
        """Run every task and return the results dict.

        `executor` (which the caller then closes) runs the requests; by default one is built from
        the settings (with `model` when given) and closed at the end.
        """
        started, date = time.perf_counter(), time.time()
        seed_globals(self.settings.seed)
        place = self.plan.place
        lock = self._lock(place)
        try:
            self.load_data()
            results = self._run_locked(
                place if lock else None, place, model, executor, started, date
            )
        finally:
            if lock is not None:
                lock.release()
        self._say_if_not_loaded()
        if self.settings.log_to and self.executor.primary:
            self.tracked = self._log_to_trackers(results)
        return results

    def _lock(self, place: OutputPlace | None) -> RunLock | None:
        """The run's lock on its files, taken before anything loads: a second run into them is
        refused at once. Only the writing process of a data-parallel launch takes it."""
        launch = launch_rank()
        if place is None or (launch is not None and launch.rank != 0):
            return None
        lock = RunLock(place.lock, f"{place.flag} {place.given}")
        lock.acquire()
        return lock

    def _run_locked(
        self,
        writes: OutputPlace | None,
        place: OutputPlace | None,
        model: LM | None,
        executor: Executor | None,
        started: float,
        date: float,
    ) -> dict[str, Any]:
        backend = self.plan.backend
        # One limit for the run, held by every API backend it builds (the model and its judges).
        self.spending = spending_limit(self.settings.max_cost)
        described = None
        if model is None and executor is None:
            described = described_model(backend, self.spending)
        if writes is not None:
            # Before any weight loads, with the identity where the backend tells it unbuilt
            # (otherwise it is checked once the model is built).
            identity = described.identity() if described is not None else None
            replaces = check_place(writes, self.plan.run_key, identity, self.settings.overwrite)
            self._replaces = replaces if identity is not None else None
        self.executor = executor or build_executor(
            self.settings, model, described, backend, self.spending
        )
        self.answering = Answering(self.executor, self.settings.unclosed_thinking)
        seed_torch(self.settings.seed)
        if isinstance(self.executor.model, DeferredBackend):
            # Torch may be imported only by the deferred build (in the background): seed it
            # again once the backend is built, before its first request.
            self.executor.model.on_built = partial(seed_torch, self.settings.seed)
        try:
            return self._run_tasks(self.executor.model, writes, started, date)
        finally:
            if executor is None:
                self.executor.close()
                if model is None and isinstance(self.settings.model, str):  # built by the run
                    self.executor.model.close()

    def _say_if_not_loaded(self) -> None:
        """One line when the response cache answered every request, so no weights loaded."""
        model = self.executor.model
        if not (isinstance(model, DeferredBackend) and model.built is None):
            return
        if self.settings.show_progress and self.executor.primary:
            print(NOT_LOADED, file=sys.stderr)
        else:
            log.info(NOT_LOADED)

    def _log_to_trackers(self, results: dict[str, Any]) -> list[str]:
        """Log the written run to each --log-to tracker; returns where each run went."""
        from assay.results.trackers import check_trackers, log_run

        s = self.settings
        assert self.files is not None  # check_settings refuses --log-to without an output
        trackers = check_trackers(s.log_to, s.log_to_args)
        return log_run(trackers, results, self.files, s.log_to_args)

    def _run_tasks(
        self, model: LM, place: OutputPlace | None, started: float, date: float
    ) -> dict[str, Any]:
        s = self.settings
        out = None
        if place is not None and self.executor.primary:
            files = run_files(
                place, self.plan.run_key, model.identity(), s.overwrite, self._replaces
            )
            out = OutputDir(files, place.flag)
        self.files = out.files if out else None
        cache_path = self._cache_path(out)
        # No response cache, or an empty one, cannot answer a request: the weights will be
        # needed, so they load while the docs are read, rendered and planned.
        fresh = cache_path is None or not cache_path.exists()
        if isinstance(model, DeferredBackend) and overlap_enabled() and fresh:
            model.prefetch()
        cache = self._cache(model, out)
        judges = Judges(s, self._cache_path(out), self.spending)
        try:
            return self._run_plans(model, started, date, out, cache, judges)
        finally:
            judges.close()

    def _run_plans(
        self,
        model: LM,
        started: float,
        date: float,
        out: OutputDir | None,
        cache: ResponseCache | None,
        judges: Judges,
    ) -> dict[str, Any]:
        # Every judge loads before the first task runs: a judge that fails to load fails the
        # run before any generation is spent.
        for specs in self.plan.judges.values():
            for spec in specs:
                judges.role(spec)
        capabilities = Capabilities.of(model)
        plans = [
            plan_task(task, self.scorers[task.name], self.settings, capabilities)
            for task in self.tasks
        ]
        judged_by = judges.identities(spec for specs in self.plan.judges.values() for spec in specs)
        info = run_info(
            self.settings,
            model,
            self.plan.run_key,
            started,
            date,
            judged_by,
            batch_size=self.plan.backend.batch_size,
        )
        results = ResultsBuilder(self.resolved.groups, info)
        usage_before = self._usage_stats()
        bill = Bill(earlier_invocations(out.files.results if out else None), date, usage_before)
        try:
            for plan in plans:
                judging = None
                if plan.name in self.plan.judges:
                    roles = [judges.role(spec) for spec in self.plan.judges[plan.name]]
                    judging = TaskJudging(roles, self.plan.judged[plan.name])
                record = self._run_task(plan, capabilities, cache, out, judging)
                raise_pending()  # what the task's code tried outside its scoring (aggregation)
                batch_sizes = task_batch_sizes(plan.name, record.stats.batch_sizes, cache)
                results.add_task(record, batch_sizes)
                if out:
                    running = self._bill(bill, judges, None, running=True)
                    out.write_results(results.results(self.executor.describe(), running))
            # The threads and timers the tasks' code started end (or a bounded wait does)
            # before the results are written as a success; a refusal stops the run as failed.
            settle()
        except BaseException as exc:
            # The bill of a stopped run: every answer paid for, and what stopped it.
            stop = stopped_by(exc, self.spending)
            self.bill = self._bill(bill, judges, stop)
            if out and (self.bill or results.tasks):  # a run that did or paid nothing: no file
                stopped = results.results(self.executor.describe(), self.bill)
                try:
                    refused = {"refused": str(exc)} if isinstance(exc, CodeRunRefused) else {}
                    out.write_results(
                        {**stopped, "assay": {**stopped["assay"], "stopped_by": stop, **refused}}
                    )
                except OSError as failed:  # a full disk: the first error is the one to tell
                    log.warning("could not record the stopped run's bill: %s", failed)
            line = bill_line(self.bill or {})
            if line and self.executor.primary:
                print(terminal_safe(line), file=sys.stderr)
            raise
        self.bill = self._bill(bill, judges, None)
        final = results.results(self.executor.describe(), self.bill)
        if out:
            results_written(out.write_results(final))
        if cache is not None:
            cache.close()
        return dict(final)

    def _bill(
        self, bill: Bill, judges: Judges, stop: str | None, running: bool = False
    ) -> dict[str, Any] | None:
        """The run's API bill as it stands (None where no API use is metered here: a model
        without an API and no API judge, or requests sent by Ray workers)."""
        readings: list[Reading] = [("model", self._usage_stats())]
        for role in judges.roles.values():
            if role.meters_usage:
                readings.append((f"judge {role.spec.model}", role.executor.model.usage_stats()))
        if all(reading is None for _, reading in readings):
            return None
        return bill.entry(readings, stop, running)

    def _run_task(
        self,
        plan: TaskPlan,
        capabilities: Capabilities,
        cache: ResponseCache | None,
        out: OutputDir | None,
        judging: TaskJudging | None = None,
    ) -> TaskRecord:
        """One task, shard by shard: docs -> requests -> executor -> filters -> judge (tasks
        with judge metrics) -> metrics; then its aggregates and samples file."""
        started = time.perf_counter()
        task, filters, metrics = plan.task, plan.scorers.filters, plan.scorers.metrics
        clustered = task.config.cluster_key is not None
        filter_names = [f.name for f in filters]
        logs = self.settings.log_samples or self.settings.predict_only
        samples = SamplesLog(
            out if logs else None,
            task.name,
            filter_names,
            task.output_type,
            clustered,
            self.settings.log_samples_reasoning,
        )
        columns = MetricColumns(metrics)
        agents = AgentTally()
        stats = RunStats()
        tally = self.answering.start_task(task.name)
        hashes: list[tuple[int, str]] = []
        ids = doc_ids(task, self.settings)
        reuse_before = self.executor.model.prefix_cache_stats()
        usage_before = self._usage_stats()
        stages = TaskStages(
            plan=plan,
            capabilities=capabilities,
            answering=self.answering,
            cache=cache,
            sandbox=self.plan.sandbox,
            judging=judging,
            confirmed_unsafe_code=self.settings.confirm_run_unsafe_code,
        )
        progress = LiveProgress(
            task.name,
            total_docs=len(ids),
            enabled=self.settings.show_progress and self.executor.primary,
            metric=_live_metric(metrics),
            status=self.executor.model.live_status,
        )
        try:
            docs = task.docs(ids)
            while shard := list(islice(docs, SHARD_DOCS)):
                results, shard_stats = stages.run(shard, progress)
                stats += shard_stats
                if task.config.agent is not None:
                    agents.add(results)
                row_hashes = [doc_hash(r.doc.row or {}) for r in results]
                hashes += [(r.doc_id, h) for r, h in zip(results, row_hashes, strict=True)]
                clusters = {r.doc_id: cluster_of(task, r.doc, r.doc_id) for r in results}
                columns.add(results, filter_names, clusters)
                samples.write(results, clusters, row_hashes)
                progress.shard_done(
                    stats.input_tokens + stats.generated_tokens,
                    stats.token_unit,
                    _first_metric(results, filter_names, progress.metric),
                    CacheCounts(stats.from_cache, stats.unique_requests),
                )
        except BaseException:
            samples.discard()  # an interrupted or failed task leaves no part files behind
            raise
        finally:
            progress.close()
            samples.close()
        stats.prefix_cache = counter_delta(reuse_before, self.executor.model.prefix_cache_stats())
        stats.api_usage = usage_delta(usage_before, self._usage_stats())
        stats.scoring = self.executor.model.scoring_choice() or {}
        stderr_notes: dict[str, str] = {}
        entry = task_entry(
            task.name,
            task.config.alias,
            len(hashes),
            columns.values(),
            self.settings.bootstrap_iters,
            clustered=clustered,
            notes=stderr_notes,
        )
        if judging is not None:
            # Judge metrics: unparseable verdicts, the judge's noise, agreement of two judges.
            entry.update(judging.tally.entries())
        if task.config.agent is not None:
            entry.update(agents.entries())
        notice = tally.warning(task.name, self.executor.model.thinking_controls)
        if notice and self.executor.primary:
            print(f"warning: {terminal_safe(notice)}", file=sys.stderr)
        evaluated = {doc_id for doc_id, _ in hashes}
        replaced = [i for i in task.replaced_self if i in evaluated]
        if replaced and self.executor.primary:
            print(f"warning: {replaced_self_notice(task, replaced)}", file=sys.stderr)
        return TaskRecord(
            task=task,
            entry=entry,  # type: ignore[arg-type]
            higher_is_better={m.metric.name: m.higher_is_better for m in metrics},
            n_docs=len(hashes),
            stats=stats,
            task_hash=samples.finish(),
            doc_hashes=hashes,
            seconds=time.perf_counter() - started,
            judges=judging.record() if judging is not None else None,
            sandbox=self._sandbox_label() if task.config.unsafe_code else None,
            generations=tally,
            replaced_self=replaced,
            stderr_notes=stderr_notes,
        )

    def _usage_stats(self) -> dict[str, int | float | str | None] | None:
        """The model's API usage so far; None where this process does not send its requests
        (Ray workers do, and their counters stay with them)."""
        if self.settings.executor != "local":
            return None
        return self.executor.model.usage_stats()

    def _sandbox_label(self) -> str:
        policy = self.plan.sandbox
        return f"docker:{policy.image}" if policy.mode == "docker" else policy.mode

    def _cache(self, model: LM, out: OutputDir | None) -> ResponseCache | None:
        path = self._cache_path(out)
        return ResponseCache(path, model.identity()) if path else None

    def _cache_path(self, out: OutputDir | None) -> Path | None:
        setting = self.settings.cache
        if setting is False:
            return None
        if isinstance(setting, str | Path):
            return Path(setting)
        return out.files.state / CACHE_FILE if out else None


def replaced_self_notice(task: Task, doc_ids: Sequence[int]) -> str:
    """What assay did where lm-eval's few-shot draw gave a doc itself as an example."""
    shown = ", ".join(map(str, doc_ids[:10])) + (" ..." if len(doc_ids) > 10 else "")
    return (
        f"{task.name}: {len(doc_ids)} doc(s) drew their own row among their few-shot examples "
        f"(the examples come from the evaluated split {task.fewshot_split()!r}, and the task "
        "sets no fewshot_split that would make lm-eval drop it); assay replaced it with another "
        f"row, so these prompts differ from lm-eval's (docs {shown}). --fewshot-keep-self "
        "keeps lm-eval's prompts (the doc's answer then appears in its own prompt)."
    )


def _live_metric(metrics: Sequence[ScoredMetric]) -> str | None:
    """The metric the live display estimates: the task's first, when its number is a mean
    whose stderr is sample stddev / sqrt(n), so the live interval is the one results.json's
    stderr gives (a corpus-level number such as f1 or bleu has no running mean)."""
    if not metrics or metrics[0].aggregation.stderr not in _MEAN_STDERRS:
        return None
    return metrics[0].metric.name


_MEAN_STDERRS = frozenset({"mean", "nan_mean", "peer_mean"})


def _first_metric(
    results: list[DocResult], filter_names: list[str], metric: str | None
) -> list[Any]:
    """A shard's per-doc values of the task's first metric under its first filter (what the
    live display estimates)."""
    if metric is None or not filter_names:
        return []
    return [r.values[filter_names[0]].get(metric) for r in results]
