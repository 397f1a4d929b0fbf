"""evaluate(): the pipeline for benchmark tasks, streamed shard by shard.

For each task: docs -> requests (`build_requests`) -> executor -> filters -> metrics ->
aggregate -> write. Every task is checked and its data loaded before the model is built; each
task's numbers and samples are written as soon as it finishes. The stages live in their own
modules (see ARCHITECTURE.md); this one wires them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from pathlib import Path
from typing import Any

from assay.errors import DataError, FailedRequests, ModelError
from assay.execution.api_usage import usage_delta
from assay.execution.budget import spending_limit
from assay.execution.cache import CACHE_FILE, ResponseCache
from assay.execution.executor import Executor
from assay.execution.progress import CacheCounts, LiveProgress
from assay.execution.seeding import seed_globals, seed_torch
from assay.execution.stats import RunStats, counter_delta, task_batch_sizes
from assay.metrics.base import ScoredMetric
from assay.metrics.judges.grading import judge_metrics
from assay.metrics.judges.role import Judges, TaskJudging, check_judges
from assay.models.base import LM, BackendLike
from assay.requests.build import (
    build_requests,
    check_images_accepted,
    follow_up_request,
    repeated,
)
from assay.requests.doc_result import DocResult
from assay.requests.plan import Capabilities, GenerationPolicy, PromptSettings, RequestPlan
from assay.requests.types import Generation
from assay.results.builder import ResultsBuilder, RunInfo, TaskRecord, git_hash
from assay.results.generations import DOCS_PAGE, GenerationTally, answer_seen
from assay.results.provenance import backend_identity
from assay.results.samples import SamplesLog, doc_hash
from assay.results.summary import MetricColumns, task_entry
from assay.results.table import make_table
from assay.results.writer import OutputDir
from assay.run.backend import backend_args, backend_class, build_executor
from assay.run.header import run_provenance
from assay.run.plan import (
    TaskPlan,
    check_cluster_field,
    check_settings,
    check_task,
    check_tasks,
    cluster_of,
    configure_task,
    doc_ids,
)
from assay.run.resume import check_folder, clear_folder, run_key, stored_run_key
from assay.run.scoring import apply_filters, score
from assay.run.settings import RunSettings, parse_cluster_by, parse_samples, setting_names
from assay.sandbox import SandboxMode, SandboxPolicy
from assay.sandbox.policy import notice as sandbox_notice
from assay.sandbox.policy import resolve as resolve_sandbox
from assay.sandbox.policy import using as using_sandbox
from assay.seeds import SEED_KEYS, Seeds
from assay.tasks.code_routes import code_route
from assay.tasks.code_routes import describe as describe_code_route
from assay.tasks.names import split_csv
from assay.tasks.registry import Registry, Resolved
from assay.tasks.task import Task

SHARD_DOCS = 2000
"""Docs per shard: memory stays flat however large a task is."""


class Evaluation:
    """One run over resolved tasks."""

    def __init__(self, resolved: Resolved, settings: RunSettings) -> None:
        check_settings(settings)
        self.resolved, self.settings = resolved, settings
        self.tracked: list[str] = []
        """Where the finished run was logged (one line per --log-to tracker)."""
        self.tasks = [
            Task(
                configure_task(r.config, settings),
                num_fewshot=r.num_fewshot if r.num_fewshot is not None else settings.num_fewshot,
                fewshot_seed=settings.seed.fewshot,
            )
            for r in resolved.tasks
        ]
        check_tasks(settings, self.tasks)
        # Every task is checked, and its filters and metrics built, before any model is.
        self.scorers = {
            task.name: check_task(
                task.config, confirm_run_unsafe_code=settings.confirm_run_unsafe_code
            )
            for task in self.tasks
        }
        self.judged = {
            name: found for name, s in self.scorers.items() if (found := judge_metrics(s.metrics))
        }
        self.judges = check_judges(
            settings, {task.name: task.config for task in self.tasks}, list(self.judged)
        )
        """Per task with judge metrics, the judges that grade it (first, and maybe second)."""
        self.sandbox = _sandbox_policy(settings, self.tasks)
        self.tallies: dict[str, GenerationTally] = {}
        """Per task run so far: how its generations ended (results.json's assay.generations)."""

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
        self.load_data()
        if self.settings.output_dir is not None:
            # Before the (slow) model load; the model's identity is checked once it is built.
            check_folder(self.settings.output_dir, self._run_key(), None, self.settings.overwrite)
        self.executor = executor or build_executor(self.settings, model)
        seed_torch(self.settings.seed)
        try:
            results = self._run_tasks(self.executor.model, started, date)
        finally:
            if executor is None:
                self.executor.close()
        if self.settings.log_to and self.executor.primary:
            self.tracked = self._log_to_trackers(results)
        return results

    def _log_to_trackers(self, results: dict[str, Any]) -> list[str]:
        """Log the written run to each --log-to tracker; returns where each run went."""
        from assay.results.trackers import check_trackers, log_run

        s = self.settings
        assert s.output_dir is not None  # check_settings refuses --log-to without it
        trackers = check_trackers(s.log_to, s.log_to_args)
        return log_run(trackers, results, s.output_dir, s.log_to_args)

    def plan(self, task: Task, capabilities: Capabilities) -> TaskPlan:
        """What the run does for `task`, with a backend of `capabilities`."""
        s, config, scorers = self.settings, task.config, self.scorers[task.name]
        requests = RequestPlan.for_task(
            config,
            PromptSettings(s.apply_chat_template, s.system_instruction, s.fewshot_as_multiturn),
            capabilities,
            GenerationPolicy.for_task(config, s.gen_kwargs, s.seed.torch),
            with_unconditioned=scorers.with_unconditioned,
        )
        return TaskPlan(task, requests, scorers)

    def _run_tasks(self, model: LM, started: float, date: float) -> dict[str, Any]:
        s = self.settings
        folder = s.output_dir if self.executor.primary else None
        if folder and check_folder(folder, self._run_key(), model.identity(), s.overwrite):
            clear_folder(folder)
        out = OutputDir(folder) if folder else None
        cache = self._cache(model, out)
        judges = Judges(s, self._cache_path(out))
        try:
            with spending_limit(s.max_cost):
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
        for specs in self.judges.values():
            for spec in specs:
                judges.role(spec)
        capabilities = Capabilities.of(model)
        plans = [self.plan(task, capabilities) for task in self.tasks]
        results = ResultsBuilder(self.resolved.groups, self._run_info(model, started, date, judges))
        for plan in plans:
            judging = None
            if plan.name in self.judges:
                roles = [judges.role(spec) for spec in self.judges[plan.name]]
                judging = TaskJudging(roles, self.judged[plan.name])
            record = self._run_task(plan, capabilities, cache, out, judging)
            results.add_task(record, task_batch_sizes(plan.name, record.stats.batch_sizes, cache))
            if out:
                out.write_results(results.results(self.executor.describe()))
        final = results.results(self.executor.describe())
        if out:
            out.write_results(final)
        if cache is not None:
            cache.close()
        return dict(final)

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
        stats = RunStats()
        self.tallies[task.name] = GenerationTally(self.settings.unclosed_thinking)
        hashes: list[tuple[int, str]] = []
        ids = doc_ids(task, self.settings)
        reuse_before = self.executor.model.prefix_cache_stats()
        usage_before = self._usage_stats()
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
                results = [
                    DocResult.of(doc_id, doc, build_requests(plan.requests, doc, capabilities))
                    for doc_id, doc in shard
                ]
                stats += self._answer(task.name, results, cache, progress)
                stats += self._follow_ups(plan, results, cache)
                apply_filters(results, filters)
                if judging is not None:
                    judging.judge(task.name, results, filter_names)
                with using_sandbox(self.sandbox):
                    score(results, task.config, metrics, filters)
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
        entry = task_entry(
            task.name,
            task.config.alias,
            len(hashes),
            columns.values(),
            self.settings.bootstrap_iters,
            clustered=clustered,
        )
        if judging is not None:
            # Judge metrics: unparseable verdicts, the judge's noise, agreement of two judges.
            entry.update(judging.tally.entries())
        notice = self.tallies[task.name].warning(task.name)
        if notice and self.executor.primary:
            print(f"warning: {notice}", file=sys.stderr)
        return TaskRecord(
            task,
            entry,  # type: ignore[arg-type]
            {m.metric.name: m.higher_is_better for m in metrics},
            len(hashes),
            stats,
            samples.finish(),
            hashes,
            time.perf_counter() - started,
            judging.record() if judging is not None else None,
            self._sandbox_label() if task.config.unsafe_code else None,
            self.tallies[task.name],
        )

    def _usage_stats(self) -> dict[str, int | float | None] | None:
        """The model's API usage so far; None where this process does not send its requests
        (Ray workers do, and their counters stay with them)."""
        if self.settings.executor != "local":
            return None
        return self.executor.model.usage_stats()

    def _sandbox_label(self) -> str:
        policy = self.sandbox
        return f"docker:{policy.image}" if policy.mode == "docker" else policy.mode

    def _answer(
        self,
        task: str,
        results: list[DocResult],
        cache: ResponseCache | None,
        progress: LiveProgress,
    ) -> RunStats:
        """Have the executor answer every request of a shard (a doc's repeats included); file
        the answers under their docs."""
        asked = [
            (result, i, request)
            for result in results
            for i, inst in enumerate(result.instances)
            for request in repeated(inst.request, result.doc.num_samples or 1)
        ]
        progress.start_shard(len(results), len(asked))
        try:
            answers = self.executor.run(
                [r for _, _, r in asked], cache=cache, progress=progress.advance
            )
        except FailedRequests as exc:
            raise _name_failed_docs(task, exc, [(res.doc_id, i) for res, i, _ in asked]) from None
        for (result, i, request), answer in zip(asked, answers, strict=True):
            result.resps[i].append(
                self._filed(task, result, (i, len(result.resps[i])), answer, request)
            )
        self._refuse_unclosed(task, results)
        return answers.stats

    def _filed(
        self, task: str, result: DocResult, slot: tuple[int, int], answer: Any, request: Any
    ) -> Any:
        """`answer` as filters see it: a Generation's answer under --unclosed-thinking, its
        metadata kept on the doc result (at `slot`: instance, repeat) and counted."""
        if not isinstance(answer, Generation):
            return answer
        if answer.has_metadata:
            result.generations[slot] = answer
            self.tallies[task].add(answer, request)
        return answer_seen(answer, self.settings.unclosed_thinking)

    def _refuse_unclosed(self, task: str, results: Sequence[DocResult]) -> None:
        """--unclosed-thinking fail: a task with a generation whose thinking never closed fails,
        naming its docs."""
        if self.settings.unclosed_thinking != "fail":
            return
        docs = [
            r.doc_id
            for r in results
            if any(g.thinking_closed is False for g in r.generations.values())
        ]
        if docs:
            shown = ", ".join(str(d) for d in docs[:10]) + (" ..." if len(docs) > 10 else "")
            raise DataError(
                f"task {task}: {len(docs)} doc(s) have a generation whose thinking never closed "
                f"(docs {shown}), and --unclosed-thinking fail refuses to score them. Raise "
                f"max_gen_toks (--gen-kwargs max_gen_toks=N) or the thinking budget, or score "
                f"them as empty answers (--unclosed-thinking empty); see {DOCS_PAGE}."
            )

    def _follow_ups(
        self, plan: TaskPlan, results: list[DocResult], cache: ResponseCache | None
    ) -> RunStats:
        """Multi-turn docs (`Doc.follow_ups`): ask each follow-up turn in the conversation so
        far, turn by turn for the whole shard; the last answer becomes the doc's response and
        the earlier exchanges its `history`."""
        stats = RunStats()
        pending = [r for r in results if r.doc.follow_ups]
        for result in pending:
            if len(result.instances) != 1 or len(result.resps[0]) != 1:
                raise DataError(
                    f"task {plan.name}: doc {result.doc_id} has follow-up turns, which need "
                    "exactly one generation per doc (no repeats, num_samples 1)."
                )
        exchanges: dict[int, list[tuple[str, str]]] = {id(r): [] for r in pending}
        last = {id(r): str(r.resps[0][0]) for r in pending}
        last_generation = {id(r): r.generations.get((0, 0)) for r in pending}
        turn = 0
        while active := [r for r in pending if turn < len(r.doc.follow_ups or [])]:
            requests = []
            for result in active:
                follow_up = (result.doc.follow_ups or [])[turn]
                exchanges[id(result)].append((last[id(result)], follow_up))
                requests.append(
                    follow_up_request(
                        plan.requests,
                        result.doc,
                        result.instances[0].request,
                        exchanges[id(result)],
                    )
                )
            try:
                answers = self.executor.run(requests, cache=cache)
            except FailedRequests as exc:
                raise _name_failed_docs(
                    plan.name, exc, [(r.doc_id, turn + 1) for r in active]
                ) from None
            stats += answers.stats
            for result, answer, request in zip(active, answers, requests, strict=True):
                result.generations.pop((0, 0), None)
                last[id(result)] = str(self._filed(plan.name, result, (0, 0), answer, request))
                last_generation[id(result)] = result.generations.get((0, 0))
            self._refuse_unclosed(plan.name, active)
            turn += 1
        for result in pending:
            said = exchanges[id(result)]
            users = [result.doc.query, *(follow_up for _, follow_up in said)]
            answers_in_order = [answer for answer, _ in said]
            result.history = list(zip(users[:-1], answers_in_order, strict=True))
            result.resps[0] = [last[id(result)]]
            generation = last_generation[id(result)]
            if generation is not None:  # the doc's response is the last turn's
                result.generations[(0, 0)] = generation
        return stats

    def _run_key(self) -> dict[str, Any]:
        return run_key(self.settings, [t.name for t in self.tasks])

    def _cache(self, model: LM, out: OutputDir | None) -> ResponseCache | None:
        path = self._cache_path(out)
        return ResponseCache(path, model.identity()) if path else None

    def _cache_path(self, out: OutputDir | None) -> Path | None:
        setting = self.settings.cache
        if setting is False:
            return None
        if isinstance(setting, str | Path):
            return Path(setting)
        return out.path / CACHE_FILE if out else None

    def _run_info(
        self, model: LM, started: float, date: float, judges: Judges | None = None
    ) -> RunInfo:
        """What produced this run, taken once when it starts."""
        s = self.settings
        config: Any = {
            "model": s.model if isinstance(s.model, str) else type(s.model).__name__,
            "model_args": s.model_args,
            "batch_size": backend_args(s).get("batch_size")
            if isinstance(s.model, str)
            else s.batch_size,
            "batch_sizes": [],  # those batch_size=auto picks, as tasks run
            "device": s.device,
            "use_cache": str(s.cache) if s.cache else None,
            "limit": s.limit,
            "bootstrap_iters": s.bootstrap_iters,
            "gen_kwargs": s.gen_kwargs,
            **dict(zip(SEED_KEYS, s.seed, strict=True)),
            "model_identity": model.identity(),
        }
        if judges is not None:
            # The run's judges (--judge-model ...), when a task uses them; a task's own judge
            # is recorded under assay.judges.
            for spec in {
                spec.key(): spec for specs in self.judges.values() for spec in specs
            }.values():
                if spec.source.startswith("--"):
                    flag = spec.source[2:].replace("-", "_")
                    config[flag] = spec.model
                    config[f"{flag}_args"] = spec.model_args
                    config[f"{flag}_identity"] = judges.role(spec).identity()
        return RunInfo(
            config,
            git_hash(),
            date,
            s.system_instruction,
            PromptSettings(
                s.apply_chat_template, s.system_instruction, s.fewshot_as_multiturn
            ).multiturn,
            s.apply_chat_template,
            run_provenance(backend_identity(model), s, {}),
            stored_run_key(self._run_key()),
            started,
        )


def _live_metric(metrics: Sequence[ScoredMetric]) -> str | None:
    """The metric the live display estimates: the task's first, when its number is a mean
    whose stderr is sample stddev / sqrt(n), so the live interval is the one results.json's
    stderr gives (a corpus-level number such as f1 or bleu has no running mean)."""
    if not metrics or metrics[0].aggregation.stderr not in _MEAN_STDERRS:
        return None
    return metrics[0].metric.name


_MEAN_STDERRS = frozenset({"mean", "nan_mean", "lighteval_mean"})


def _first_metric(
    results: list[DocResult], filter_names: list[str], metric: str | None
) -> list[Any]:
    """A shard's per-doc values of the task's first metric under its first filter (what the
    live display estimates)."""
    if metric is None or not filter_names:
        return []
    return [r.values[filter_names[0]].get(metric) for r in results]


def _name_failed_docs(task: str, exc: FailedRequests, owners: list[tuple[int, int]]) -> ModelError:
    """`exc` told by doc: which docs of `task` lost a request, and why (the first few)."""
    failed = sorted(exc.failures.items())
    docs = sorted({owners[i][0] for i, _ in failed})
    shown = "; ".join(
        f"doc {owners[i][0]} request {owners[i][1]}: {reason.rstrip('. ')}"
        for i, reason in failed[:5]
    )
    more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
    return ModelError(
        f"task {task}: {len(docs)} doc(s) could not be scored because their requests failed "
        f"({shown}{more}); the task was not scored. Answers that arrived are in the response "
        f"cache: re-run to ask only for the rest. Backend said: {exc}"
    )


def _sandbox_policy(settings: RunSettings, tasks: Sequence[Task]) -> SandboxPolicy:
    """The sandbox the run's code tasks use, checked now (before any model is built), with a
    line on stderr saying what it isolates; the unchecked default when no task runs code."""
    policy = SandboxPolicy(settings.sandbox, settings.sandbox_image, settings.sandbox_workers)
    routes = {task.name: code_route(task.config) for task in tasks if task.config.unsafe_code}
    if not any(route.sandboxed for route in routes.values()):
        for name, route in routes.items():  # the task's own code runs them, not the sandbox
            print(describe_code_route(name, route, policy.mode), file=sys.stderr)
        return policy
    resolved = resolve_sandbox(policy)
    where = f"docker image {resolved.image}" if resolved.mode == "docker" else resolved.mode
    for name, route in routes.items():
        print(describe_code_route(name, route, where), file=sys.stderr)
    print(sandbox_notice(resolved), file=sys.stderr)
    return resolved


def evaluate(
    model: str | LM | BackendLike,
    tasks: str | Sequence[str],
    *,
    model_args: dict[str, Any] | str | None = None,
    include_path: str | Path | Sequence[str | Path] = (),
    custom_tasks: str | Path | Sequence[str | Path] = (),
    num_fewshot: int | None = RunSettings.num_fewshot,
    limit: int | float | None = RunSettings.limit,
    samples: dict[str, list[int]] | str | None = None,
    cluster_by: dict[str, str] | str | None = None,
    batch_size: int | str | None = RunSettings.batch_size,
    device: str | None = RunSettings.device,
    batch_api: bool = RunSettings.batch_api,
    max_cost: float | None = RunSettings.max_cost,
    output_dir: str | Path | None = RunSettings.output_dir,
    log_samples: bool = RunSettings.log_samples,
    predict_only: bool = RunSettings.predict_only,
    log_samples_reasoning: str = RunSettings.log_samples_reasoning,
    unclosed_thinking: str = RunSettings.unclosed_thinking,
    seed: Seeds | int | str | Sequence[int | None] | None = RunSettings.seed,
    apply_chat_template: bool = RunSettings.apply_chat_template,
    system_instruction: str | None = RunSettings.system_instruction,
    fewshot_as_multiturn: bool | None = RunSettings.fewshot_as_multiturn,
    gen_kwargs: dict[str, Any] | str | None = None,
    metadata: dict[str, Any] | str | None = None,
    bootstrap_iters: int = RunSettings.bootstrap_iters,
    cache: str | Path | bool | None = RunSettings.cache,
    confirm_run_unsafe_code: bool = RunSettings.confirm_run_unsafe_code,
    sandbox: SandboxMode = RunSettings.sandbox,
    sandbox_image: str | None = RunSettings.sandbox_image,
    sandbox_workers: int | None = RunSettings.sandbox_workers,
    dataset_loading_processes: int = RunSettings.dataset_loading_processes,
    show_progress: bool = RunSettings.show_progress,
    executor: str = RunSettings.executor,
    replicas: int | None = RunSettings.replicas,
    gpus_per_replica: float | None = RunSettings.gpus_per_replica,
    ray_address: str | None = RunSettings.ray_address,
    overwrite: bool = RunSettings.overwrite,
    judge_model: str | None = RunSettings.judge_model,
    judge_model_args: dict[str, Any] | str | None = None,
    second_judge_model: str | None = RunSettings.second_judge_model,
    second_judge_model_args: dict[str, Any] | str | None = None,
    log_to: str | Sequence[str] | None = None,
    log_to_args: dict[str, Any] | str | None = None,
) -> dict[str, Any]:
    """Evaluate `model` (a backend name such as "hf", an LM object, or any object with LM's
    request methods and `identity`: `BackendLike`) on `tasks` and return the results dict
    (lm-eval layout).

    Arguments take the command line's forms too: `tasks="a,b"`, `model_args` and `gen_kwargs`
    as "k=v,k2=v2" strings, a single include path or custom task file. The keywords after
    `custom_tasks` are the fields of RunSettings, with its defaults (documented there).
    """
    from assay.models.args import parse_kv

    settings = {k: v for k, v in locals().items() if k in _KEYWORD_SETTINGS}
    run = RunSettings(
        **settings,
        model=model,
        model_args=parse_kv(model_args, "model_args"),
        judge_model_args=parse_kv(judge_model_args, "judge_model_args"),
        second_judge_model_args=parse_kv(second_judge_model_args, "second_judge_model_args"),
        gen_kwargs=parse_kv(gen_kwargs, "gen_kwargs"),
        metadata=parse_kv(metadata, "metadata"),
        samples=parse_samples(samples, "samples"),
        cluster_by=parse_cluster_by(cluster_by),
        log_to=split_csv([log_to] if isinstance(log_to, str) else list(log_to or [])),
        log_to_args=parse_kv(log_to_args, "log_to_args"),
    )
    registry = Registry(_paths(include_path), _paths(custom_tasks))
    names = split_csv([tasks] if isinstance(tasks, str) else list(tasks))
    evaluation = Evaluation(registry.resolve(names), run)
    return evaluation.run()


_KEYWORD_SETTINGS = frozenset(setting_names()) - {
    "model",
    "model_args",
    "judge_model_args",
    "second_judge_model_args",
    "gen_kwargs",
    "metadata",
    "samples",
    "cluster_by",
    "log_to",
    "log_to_args",
}
"""The RunSettings fields evaluate() takes as plain keywords (the rest are parsed first)."""


def _paths(value: str | Path | Sequence[str | Path]) -> list[str | Path]:
    """One path or several (a lone string is a path, not a sequence of characters)."""
    return [value] if isinstance(value, str | Path) else list(value)


def results_tables(results: dict[str, Any]) -> str:
    """The printed tables: tasks, then groups when there are any."""
    tables = [make_table(results, "results")]
    if results.get("groups"):
        tables.append(make_table(results, "groups"))
    return "\n\n".join(table.rstrip("\n") for table in tables)
