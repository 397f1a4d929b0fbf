"""evaluate(): the whole pipeline for benchmark tasks, streamed shard by shard.

task -> docs -> prompts -> requests -> model -> responses -> filters -> metrics -> aggregates ->
results. Every task is validated and its data loaded before the model is built; each task's
numbers and samples are written as soon as it finishes.
"""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from assay.doc import Doc
from assay.errors import ConfigError, DataError, FailedRequests, ModelError
from assay.execution.cache import ResponseCache
from assay.execution.executor import Executor
from assay.execution.local import LocalExecutor
from assay.execution.stats import RunStats, collapse_repeats, task_batch_sizes
from assay.models.base import LM, checked_backend, load_model
from assay.plan import TaskPlan, check_task
from assay.requests.build import build_requests
from assay.requests.plan import Capabilities, GenerationPolicy, PromptSettings, RequestPlan
from assay.requests.types import GenerateRequest, normalize_gen_kwargs
from assay.results.provenance import backend_identity, run_provenance, task_provenance
from assay.results.rerun import check_folder, clear_folder, run_key
from assay.results.schema import TaskProvenance, cluster_label
from assay.results.summary import GroupSpec, MetricValues, group_entry, task_entry
from assay.results.table import make_table
from assay.results.task_config import config_dump
from assay.results.writer import OutputDir
from assay.scoring import DocResult, apply_filters, doc_hash, dumps, sample_record, score
from assay.settings import RunSettings, parse_cluster_by, parse_samples, setting_names
from assay.tasks.config import MetricSpec, TaskConfig
from assay.tasks.names import split_csv
from assay.tasks.registry import Registry, Resolved
from assay.tasks.task import Task

log = logging.getLogger(__name__)

SHARD_DOCS = 2000
"""Docs per shard: memory stays flat however large a task is."""


def _git_hash() -> str | None:
    try:
        out = subprocess.run(
            ["git", "describe", "--always"], capture_output=True, text=True, timeout=5, check=False
        )
    except OSError:
        return None
    return out.stdout.strip() or None


def backend_args(settings: RunSettings) -> dict[str, Any]:
    """--model-args with the run-level --batch-size and --device merged in.

    A flag and a model arg that disagree are refused: either choice would ignore one of them."""
    args = dict(settings.model_args)
    for key, value in (("batch_size", settings.batch_size), ("device", settings.device)):
        if value is None:
            continue
        if key in args and str(args[key]) != str(value):
            flag = "--" + key.replace("_", "-")
            raise ConfigError(
                f"{flag} {value} and --model-args {key}={args[key]} disagree; give one of them."
            )
        args.setdefault(key, value)
    return args


def build_model(settings: RunSettings) -> LM:
    """The backend named by the settings (or the LM object given)."""
    if not isinstance(settings.model, str):
        return checked_backend(settings.model, "model")
    return load_model(settings.model, backend_args(settings))


def build_executor(settings: RunSettings, model: LM | None = None) -> Executor:
    """The executor named by settings.executor, holding the settings' model (or `model`)."""
    s = settings
    if s.executor == "ray":
        if model is not None or not isinstance(s.model, str):
            raise ConfigError(
                "--executor ray builds one model replica per Ray actor from --model and "
                "--model-args: pass a backend name, not a model object."
            )
        from assay.execution.ray import RayExecutor

        return RayExecutor(
            s.model,
            backend_args(s),
            replicas=s.replicas,
            gpus_per_replica=s.gpus_per_replica,
            address=s.ray_address,
        )
    if s.executor != "local":
        raise ConfigError(f"--executor {s.executor!r}: choose local or ray.")
    for flag, value in (
        ("--replicas", s.replicas),
        ("--gpus-per-replica", s.gpus_per_replica),
        ("--ray-address", s.ray_address),
    ):
        if value is not None:
            raise ConfigError(f"{flag} applies to --executor ray only; add --executor ray.")
    from assay.execution.distributed import launch_rank

    launch = launch_rank()
    if launch is None:
        return LocalExecutor(model or build_model(s))
    # Started by accelerate/torchrun: one model per rank, on the rank's own GPU when there are GPUs.
    from assay.execution.distributed import DataParallelExecutor

    if model is None and s.device is None and _has_cuda():
        s = replace(s, device=f"cuda:{launch.local_rank}")
    return DataParallelExecutor(model or build_model(s), launch)


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


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _check_settings(settings: RunSettings) -> None:
    """Reject bad run flags before any task is loaded or model built, naming the flag."""
    if settings.num_fewshot is not None and settings.num_fewshot < 0:
        raise ConfigError(f"--num-fewshot {settings.num_fewshot}: must be 0 or more.")
    if isinstance(settings.model, str):
        backend_args(settings)  # a --batch-size / --device that contradicts --model-args
    if settings.fewshot_as_multiturn and not settings.apply_chat_template:
        raise ConfigError("--fewshot-as-multiturn needs --apply-chat-template.")
    # Checked alone, whatever the tasks: a typo here must not surface mid-run.
    normalize_gen_kwargs(settings.gen_kwargs, default_until=[], source="--gen-kwargs")
    if settings.samples is not None and settings.limit is not None:
        raise ConfigError(
            "--samples and --limit both choose docs; give one (--samples names the doc ids)."
        )
    if (settings.log_samples or settings.predict_only) and settings.output_dir is None:
        flag = "--predict-only" if settings.predict_only else "--log-samples"
        raise ConfigError(f"{flag} needs --output-dir (where samples files are written).")


def _configured(config: TaskConfig, settings: RunSettings) -> TaskConfig:
    """A task's config with the run's --metadata merged in and, for --predict-only, lm-eval's
    bypass metric in place of its metrics (no scoring code runs)."""
    changes: dict[str, Any] = {}
    if settings.metadata:
        changes["metadata"] = {**config.metadata, **settings.metadata}
    if config.name in settings.cluster_by:
        changes["cluster_key"] = settings.cluster_by[config.name]
    if settings.predict_only:
        # The output type stays what the task's own metrics make it.
        changes.update(
            metrics=[MetricSpec("bypass")],
            process_results=None,
            output_type=config.resolved_output_type,
        )
    return replace(config, **changes) if changes else config


def _check_samples(samples: dict[str, list[int]], tasks: Sequence[Task]) -> None:
    """--samples names tasks of this run, each with a list of doc ids."""
    names = [t.name for t in tasks]
    for name, ids in samples.items():
        if name not in names:
            raise ConfigError(
                f"--samples: {name!r} is not a task of this run (tasks: {', '.join(names)})."
            )
        if not isinstance(ids, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids
        ):
            raise ConfigError(
                f"--samples: {name!r} must map to a list of doc ids (whole numbers >= 0), "
                f"got {ids!r}."
            )


def _check_cluster_by(cluster_by: dict[str, str], tasks: Sequence[Task]) -> None:
    """--cluster-by names tasks of this run."""
    names = [t.name for t in tasks]
    for name in cluster_by:
        if name not in names:
            raise ConfigError(
                f"--cluster-by: {name!r} is not a task of this run (tasks: {', '.join(names)})."
            )


def _check_cluster_field(task: Task, doc: Doc | None) -> None:
    """The task's cluster field exists in its first doc (checked before the model loads)."""
    key = task.config.cluster_key
    if key is None or doc is None:
        return
    cluster_of(task, doc, 0)


def cluster_of(task: Task, doc: Doc, doc_id: int) -> Any:
    """The doc's cluster label: its value of the task's cluster field, long texts hashed
    (None when the task has none)."""
    key = task.config.cluster_key
    if key is None:
        return None
    row = doc.row or {}
    if key not in row:
        raise DataError(
            f"{task.config.where()}: cluster field {key!r} (cluster_key / --cluster-by) is not a "
            f"field of doc {doc_id}; its fields are {sorted(row)}. Name a field every doc has."
        )
    return cluster_label(row[key])


class Evaluation:
    """One run over resolved tasks."""

    def __init__(self, resolved: Resolved, settings: RunSettings) -> None:
        _check_settings(settings)
        self.resolved, self.settings = resolved, settings
        self._doc_hashes: dict[str, list[tuple[int, str]]] = {}
        """Per task being run: (doc id, doc_hash) of every doc scored (its fingerprint)."""
        self.tasks = [
            Task(
                _configured(r.config, settings),
                num_fewshot=r.num_fewshot if r.num_fewshot is not None else settings.num_fewshot,
                fewshot_seed=settings.fewshot_seed,
            )
            for r in resolved.tasks
        ]
        if settings.samples is not None:
            _check_samples(settings.samples, self.tasks)
        _check_cluster_by(settings.cluster_by, self.tasks)
        # Every task is checked, and its filters and metrics built, before any model is.
        self.scorers = {
            task.name: check_task(
                task.config, confirm_run_unsafe_code=settings.confirm_run_unsafe_code
            )
            for task in self.tasks
        }

    @property
    def _logs_samples(self) -> bool:
        return self.settings.log_samples or self.settings.predict_only

    def load_data(self) -> None:
        """Load every task's dataset and build its first doc (in parallel), before any model is
        built: a wrong split, a too small few-shot pool or a template that breaks on the data
        then fails before the (slow) model load. Only the first doc is built, so the run still
        streams the rest."""
        workers = max(1, min(self.settings.dataset_loading_processes, len(self.tasks)))

        def check(task: Task) -> None:
            _check_cluster_field(task, task.load().first_doc())

        if workers == 1:
            for task in self.tasks:
                check(task)
            return
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(check, self.tasks))

    # ------------------------------------------------------------------ run
    def run(self, model: LM | None = None, executor: Executor | None = None) -> dict[str, Any]:
        """Run every task and return the results dict.

        `executor` (which the caller then closes) runs the requests; by default one is built from
        the settings (with `model` when given) and closed at the end.
        """
        started = time.perf_counter()
        date = time.time()
        self.load_data()
        if self.settings.output_dir is not None:
            # Before the (slow) model load; the model's identity is checked once it is built.
            check_folder(self.settings.output_dir, self._run_key(), None, self.settings.overwrite)
        self.executor = executor or build_executor(self.settings, model)
        try:
            return self._run_tasks(self.executor.model, started, date)
        finally:
            if executor is None:
                self.executor.close()

    def _run_tasks(self, model: LM, started: float, date: float) -> dict[str, Any]:
        s = self.settings
        writes = s.output_dir and self.executor.primary
        if writes and check_folder(s.output_dir, self._run_key(), model.identity(), s.overwrite):
            clear_folder(s.output_dir)
        out = OutputDir(s.output_dir) if writes else None
        cache = self._cache(model, out)
        self.capabilities = Capabilities.of(model)
        plans = [self.plan(task, self.capabilities) for task in self.tasks]
        results: dict[str, Any] = {
            "results": {},
            "groups": {},
            "group_subtasks": {},
            "configs": {},
            "versions": {},
            "n-shot": {},
            "higher_is_better": {},
            "n-samples": {},
            "task_hashes": {},
        }
        assay_extra: dict[str, Any] = {"timings": {}, "requests": {}}
        batch_sizes: list[int] = []
        self._backend = backend_identity(model)
        self._provenance: dict[str, TaskProvenance] = {}
        for plan in plans:
            task = plan.task
            t0 = time.perf_counter()
            entry, stats, n_docs, task_hash = self._run_task(plan, model, cache, out)
            batch_sizes = collapse_repeats(
                [*batch_sizes, *task_batch_sizes(task.name, stats.batch_sizes, cache)]
            )
            cfg = task.config
            results["results"][task.name] = entry
            results["configs"][task.name] = config_dump(task, self.settings.gen_kwargs)
            self._provenance[task.name] = task_provenance(
                task, results["configs"][task.name], self._doc_hashes.pop(task.name)
            )
            results["versions"][task.name] = cfg.version
            results["n-shot"][task.name] = task.shots
            results["higher_is_better"][task.name] = {
                m.metric.name: m.higher_is_better for m in self.scorers[task.name].metrics
            }
            results["n-samples"][task.name] = {
                "original": len(task.eval_rows()),
                "effective": n_docs,
            }
            assay_extra["timings"][task.name] = round(time.perf_counter() - t0, 3)
            if task_hash:
                results["task_hashes"][task.name] = task_hash
            assay_extra["requests"][task.name] = stats.counts()
            self._groups(results)
            if out:
                out.write_results(
                    self._finish(results, assay_extra, model, batch_sizes, started, date)
                )
        final = self._finish(results, assay_extra, model, batch_sizes, started, date)
        if out:
            out.write_results(final)
        if cache is not None:
            cache.close()
        return final

    def _run_key(self) -> dict[str, Any]:
        return run_key(self.settings, [t.name for t in self.tasks])

    def _cache(self, model: LM, out: OutputDir | None) -> ResponseCache | None:
        setting = self.settings.cache
        if setting is False:
            return None
        path = (
            Path(setting)
            if isinstance(setting, str | Path)
            else (out.path / "cache.sqlite" if out else None)
        )
        return ResponseCache(path, model.identity()) if path else None

    def plan(self, task: Task, capabilities: Capabilities) -> TaskPlan:
        """What the run does for `task`, with a backend of `capabilities`."""
        s, config, scorers = self.settings, task.config, self.scorers[task.name]
        requests = RequestPlan.for_task(
            config,
            PromptSettings(s.apply_chat_template, s.system_instruction, s.fewshot_as_multiturn),
            capabilities,
            GenerationPolicy.for_task(config, s.gen_kwargs, s.seed),
            with_unconditioned=scorers.with_unconditioned,
        )
        return TaskPlan(task, requests, scorers)

    def _run_task(
        self, plan: TaskPlan, model: LM, cache: ResponseCache | None, out: OutputDir | None
    ) -> tuple[dict[str, Any], RunStats, int, str | None]:
        task, cfg = plan.task, plan.task.config
        filters, metrics = plan.scorers.filters, plan.scorers.metrics
        output_type = task.output_type
        indices = self._doc_indices(task)
        columns: dict[tuple[str, str], MetricValues] = {}
        hashes = self._doc_hashes[task.name] = []
        parts = {
            f.name: (out.path / f".samples_{task.name}.{i}.part") if out else None
            for i, f in enumerate(filters)
        }
        handles = {
            name: p.open("w", encoding="utf-8")
            for name, p in parts.items()
            if p and self._logs_samples
        }
        stats = RunStats()
        progress = _Progress(
            f"{task.name}", enabled=self.settings.show_progress and self.executor.primary
        )
        n_docs = 0
        try:
            docs_iter = task.docs(indices)
            while True:
                shard = [d for _, d in zip(range(SHARD_DOCS), docs_iter)]
                if not shard:
                    break
                results = self._run_shard(plan, shard, cache, stats, progress)
                apply_filters(results, filters)
                score(results, cfg, metrics, filters)
                hashes += [(r.doc_id, doc_hash(r.doc.row or {})) for r in results]
                clusters = {r.doc_id: cluster_of(task, r.doc, r.doc_id) for r in results}
                n_docs += len(results)
                for ensemble in filters:
                    for result in results:
                        values = result.values[ensemble.name]
                        for m_name, value in values.items():
                            col = columns.get((m_name, ensemble.name))
                            if col is None:
                                col = columns[(m_name, ensemble.name)] = self._column(
                                    m_name, ensemble.name, metrics, cfg
                                )
                            col.values.append(value)
                            col.clusters.append(clusters[result.doc_id])
                        if ensemble.name in handles:
                            record = sample_record(
                                result,
                                ensemble.name,
                                output_type,
                                list(values),
                                clustered=cfg.cluster_key is not None,
                                cluster=clusters[result.doc_id],
                            )
                            handles[ensemble.name].write(dumps(record) + "\n")
        finally:
            progress.close()
            for handle in handles.values():
                handle.close()
        task_hash = None
        if out and self._logs_samples:
            task_hash = out.write_samples(task.name, [p for p in parts.values() if p])
        entry = task_entry(
            task.name,
            cfg.alias,
            n_docs,
            list(columns.values()),
            self.settings.bootstrap_iters,
            clustered=cfg.cluster_key is not None,
        )
        return entry, stats, n_docs, task_hash

    def _doc_indices(self, task: Task) -> list[int]:
        """The docs to run: --samples' ids for the task (in doc order), else --limit's."""
        ids = (self.settings.samples or {}).get(task.name)
        if ids is None:
            return task.doc_indices(self.settings.limit)
        total = len(task.eval_rows())
        beyond = sorted(i for i in set(ids) if i >= total)
        if beyond:
            raise ConfigError(
                f"--samples: task {task.name} has {total} docs (ids 0 to {total - 1}); "
                f"got id(s) {', '.join(map(str, beyond))}."
            )
        return sorted(set(ids))

    def _column(self, metric: str, flt: str, metrics: Sequence[Any], cfg: Any) -> MetricValues:
        for m in metrics:
            if m.metric.name == metric:
                return MetricValues(metric, flt, m.aggregation, m.higher_is_better)
        from assay.metrics.base import AGGREGATIONS

        return MetricValues(metric, flt, AGGREGATIONS.get("mean"), True)

    def _run_shard(
        self,
        plan: TaskPlan,
        shard: list[tuple[int, Doc]],
        cache: ResponseCache | None,
        stats: RunStats,
        progress: _Progress,
    ) -> list[DocResult]:
        task = plan.task
        results: list[DocResult] = []
        flat: list[Any] = []
        for doc_id, doc in shard:
            instances = build_requests(plan.requests, doc, self.capabilities)
            repeats = doc.num_samples or 1
            result = DocResult(doc_id, doc, instances, [[] for _ in instances])
            for i, inst in enumerate(instances):
                for k in range(repeats):
                    request = inst.request
                    if isinstance(request, GenerateRequest) and request.params.do_sample:
                        request = GenerateRequest(request.prompt, request.params, k)
                    flat.append((result, i, request))
            results.append(result)
        progress.add_total(len(flat))
        try:
            answers = self.executor.run(
                [r for _, _, r in flat], cache=cache, progress=progress.advance
            )
        except FailedRequests as exc:
            raise _name_failed_docs(
                task.name, exc, [(res.doc_id, i) for res, i, _ in flat]
            ) from None
        stats += answers.stats
        for (result, i, _), answer in zip(flat, answers, strict=True):
            result.resps[i].append(answer)
        return results

    def _groups(self, results: dict[str, Any]) -> None:
        done = results["results"]
        for node in self.resolved.groups:
            cfg = node.config
            results["group_subtasks"][cfg.name] = list(node.children)
            children = [done.get(c) or results["groups"].get(c) for c in node.children]
            if any(c is None for c in children):
                continue
            if not cfg.aggregate_metric_list:
                done.setdefault(cfg.name, {"name": cfg.name, "alias": cfg.alias or cfg.name})
                continue
            specs = [
                GroupSpec(
                    a["metric"],
                    _as_list(a.get("filter_list")),
                    bool(a.get("weight_by_size", True)),
                    a["aggregation"] if callable(a.get("aggregation")) else None,
                )
                for a in cfg.aggregate_metric_list
            ]
            # lm-eval aggregates a group over its leaf tasks, not over its subgroups' results.
            leaves = [done[t] for t in self._leaf_tasks(cfg.name) if t in done]
            entry = group_entry(cfg.name, cfg.alias, leaves, specs)
            results["groups"][cfg.name] = entry
            results["versions"][cfg.name] = str(cfg.version) if cfg.version is not None else "N/A"
            shots = {results["n-shot"].get(c) for c in node.children}
            if len(shots) == 1:
                results["n-shot"][cfg.name] = shots.pop()
            merged: dict[str, Any] = {}
            for c in node.children:
                for metric, higher in results["higher_is_better"].get(c, {}).items():
                    merged[metric] = higher if merged.get(metric, higher) == higher else None
            results["higher_is_better"][cfg.name] = merged

    def _leaf_tasks(self, name: str) -> list[str]:
        """The tasks under a group, through its subgroups (a task name gives itself)."""
        node = next((n for n in self.resolved.groups if n.config.name == name), None)
        if node is None:
            return [name]
        return [leaf for child in node.children for leaf in self._leaf_tasks(child)]

    def _finish(
        self,
        results: dict[str, Any],
        extra: dict[str, Any],
        model: LM,
        batch_sizes: list[int],
        started: float,
        date: float,
    ) -> dict[str, Any]:
        s = self.settings
        final = {
            key: dict(value) if isinstance(value, dict) else value for key, value in results.items()
        }
        # Groups are listed first, as lm-eval does.
        for name, entry in results["groups"].items():
            final["results"] = {
                name: entry,
                **{k: v for k, v in final["results"].items() if k != name},
            }
        for key in ("versions", "n-shot", "higher_is_better"):
            final[key] = dict(sorted(final[key].items()))
        final["config"] = {
            "model": s.model if isinstance(s.model, str) else type(s.model).__name__,
            "model_args": s.model_args,
            "batch_size": backend_args(s).get("batch_size")
            if isinstance(s.model, str)
            else s.batch_size,
            "batch_sizes": batch_sizes,
            "device": s.device,
            "use_cache": str(s.cache) if s.cache else None,
            "limit": s.limit,
            "bootstrap_iters": s.bootstrap_iters,
            "gen_kwargs": s.gen_kwargs,
            "random_seed": s.seed,
            "fewshot_seed": s.fewshot_seed,
            "model_identity": model.identity(),
        }
        final["git_hash"] = _git_hash()
        final["date"] = date
        final["system_instruction"] = s.system_instruction
        final["fewshot_as_multiturn"] = bool(s.fewshot_as_multiturn)
        final["chat_template_applied"] = s.apply_chat_template
        final["provenance"] = run_provenance(self._backend, s, self._provenance)
        final["assay"] = {**extra, "executor": self.executor.describe(), "run": self._run_key()}
        final["total_evaluation_time_seconds"] = str(time.perf_counter() - started)
        return final


class _Progress:
    """A rich progress bar with ETA (only on a terminal)."""

    def __init__(self, label: str, enabled: bool) -> None:
        import sys

        self.bar = None
        if enabled and sys.stderr.isatty():
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                transient=False,
            )
            self.bar.start()
            self.task = self.bar.add_task(label, total=0)

    def add_total(self, n: int) -> None:
        if self.bar:
            self.bar.update(self.task, total=(self.bar.tasks[0].total or 0) + n)

    def advance(self, n: int) -> None:
        if self.bar:
            self.bar.advance(self.task, n)

    def close(self) -> None:
        if self.bar:
            self.bar.stop()


def _as_list(value: Any) -> list[str] | None:
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


def evaluate(
    model: str | LM,
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
    output_dir: str | Path | None = RunSettings.output_dir,
    log_samples: bool = RunSettings.log_samples,
    predict_only: bool = RunSettings.predict_only,
    seed: int = RunSettings.seed,
    fewshot_seed: int = RunSettings.fewshot_seed,
    apply_chat_template: bool = RunSettings.apply_chat_template,
    system_instruction: str | None = RunSettings.system_instruction,
    fewshot_as_multiturn: bool | None = RunSettings.fewshot_as_multiturn,
    gen_kwargs: dict[str, Any] | str | None = None,
    metadata: dict[str, Any] | str | None = None,
    bootstrap_iters: int = RunSettings.bootstrap_iters,
    cache: str | Path | bool | None = RunSettings.cache,
    confirm_run_unsafe_code: bool = RunSettings.confirm_run_unsafe_code,
    dataset_loading_processes: int = RunSettings.dataset_loading_processes,
    show_progress: bool = RunSettings.show_progress,
    executor: str = RunSettings.executor,
    replicas: int | None = RunSettings.replicas,
    gpus_per_replica: float | None = RunSettings.gpus_per_replica,
    ray_address: str | None = RunSettings.ray_address,
    overwrite: bool = RunSettings.overwrite,
) -> dict[str, Any]:
    """Evaluate `model` (a backend name such as "hf", or an LM object) on `tasks` and return the
    results dict (lm-eval layout).

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
        gen_kwargs=parse_kv(gen_kwargs, "gen_kwargs"),
        metadata=parse_kv(metadata, "metadata"),
        samples=parse_samples(samples, "samples"),
        cluster_by=parse_cluster_by(cluster_by),
    )
    registry = Registry(_paths(include_path), _paths(custom_tasks))
    names = split_csv([tasks] if isinstance(tasks, str) else list(tasks))
    evaluation = Evaluation(registry.resolve(names), run)
    return evaluation.run()


_KEYWORD_SETTINGS = frozenset(setting_names()) - {
    "model",
    "model_args",
    "gen_kwargs",
    "metadata",
    "samples",
    "cluster_by",
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
