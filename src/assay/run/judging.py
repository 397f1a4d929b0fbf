"""The judging stage of a run: which judge models grade which task, their executors and caches,
and the shard by shard judging that runs between filters and metrics (verdict parsing and the
judge metrics are `assay.metrics.judges`).

A judge is any assay backend, built from the run's settings as the evaluated model is
(`run.backend.build_executor`) and run through the same kind of executor, so batching,
concurrency limits and retries apply to it too. Its answers go to the run's response cache
under the judge's own identity (cache keys hold the model identity), so they never collide
with the evaluated model's and a re-run asks the judge nothing it already answered.

`--judge-model` (with `--judge-model-args`) is the run's judge; a task that names its own
(`TaskConfig.judge_model`, or `metadata: {judge_model: ...}` in YAML) is graded by that one
instead, and the run says so. A second judge (`--second-judge-model`, or the task's
`second_judge_model`) grades the same answers again: the task's numbers stay the first judge's,
and the results add the second judge's number and how far the two agree.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from assay.errors import ConfigError, FailedRequests, ModelError, TaskConfigError
from assay.execution.executor import Executor
from assay.execution.stats import RunStats
from assay.metrics.base import judge_metric_names
from assay.metrics.judges.grading import Judgement, JudgeMetric
from assay.metrics.judges.stage import Verdict, judge_shard
from assay.metrics.judges.tally import JudgeTally
from assay.models.api.budget import SpendingLimit
from assay.models.api.usage_totals import usage_delta
from assay.models.base import MODELS
from assay.requests.cache import ResponseCache
from assay.requests.doc_result import DocResult
from assay.requests.types import canonical_json
from assay.run.backend import build_executor, judge_source
from assay.run.settings import RunSettings
from assay.tasks.config import TaskConfig
from assay.util.redact import redact

log = logging.getLogger(__name__)


def _judge_metrics() -> str:
    """The registered judge metrics, for messages."""
    return ", ".join(judge_metric_names())


@dataclass(frozen=True)
class JudgeSpec:
    """One judge model: a backend name and its arguments, and who named it."""

    model: str
    model_args: dict[str, Any] = field(default_factory=dict)
    source: str = "--judge-model"
    """Where it was named: a flag, or the task whose config names it."""

    def key(self) -> str:
        """What identifies the judge within a run (two tasks naming the same share it)."""
        return canonical_json([self.model, self.model_args])

    def label(self) -> str:
        """As printed: `backend(k=v, ...)`, secrets (api_key=...) masked."""
        args = ", ".join(f"{k}={v}" for k, v in redact(self.model_args).items())
        return f"{self.model}({args})" if args else self.model


def run_judges(settings: RunSettings) -> list[JudgeSpec]:
    """The run's judges: --judge-model, and --second-judge-model when given."""
    specs = []
    if settings.judge_model is not None:
        specs.append(JudgeSpec(settings.judge_model, dict(settings.judge_model_args)))
    if settings.second_judge_model is not None:
        specs.append(
            JudgeSpec(
                settings.second_judge_model,
                dict(settings.second_judge_model_args),
                "--second-judge-model",
            )
        )
    return specs


def task_judges(config: TaskConfig, settings: RunSettings) -> list[JudgeSpec]:
    """The judges that grade `config`: its own when it names one, else the run's."""
    if config.judge_model is None:
        return run_judges(settings)
    where = f"task {config.name}"
    specs = [JudgeSpec(config.judge_model, dict(config.judge_model_args), where)]
    if config.second_judge_model is not None:
        specs.append(
            JudgeSpec(config.second_judge_model, dict(config.second_judge_model_args), where)
        )
    return specs


def check_judges(
    settings: RunSettings, configs: dict[str, TaskConfig], judged: Sequence[str]
) -> dict[str, list[JudgeSpec]]:
    """Which judges grade each judged task; refuses a judged task without a judge and a judge
    nothing uses, before any model loads. Prints each task that brings its own judge."""
    if settings.judge_model_args and settings.judge_model is None:
        raise ConfigError("--judge-model-args needs --judge-model NAME.")
    if settings.second_judge_model_args and settings.second_judge_model is None:
        raise ConfigError("--second-judge-model-args needs --second-judge-model NAME.")
    if settings.second_judge_model is not None and settings.judge_model is None:
        raise ConfigError(
            f"--second-judge-model {settings.second_judge_model}: a second judge needs a "
            "first; pass --judge-model NAME too."
        )
    for name, config in configs.items():
        # --predict-only scores nothing, so a task's own judge has nothing to do there.
        if config.judge_model is not None and name not in judged and not settings.predict_only:
            raise TaskConfigError(
                f"{config.where()}: names a judge model ({config.judge_model}) but has no judge "
                f"metric ({_judge_metrics()}); remove judge_model or add one to its metrics."
            )
    flagged = run_judges(settings)
    if flagged and settings.predict_only:
        raise ConfigError(
            f"--judge-model {settings.judge_model}: --predict-only computes no metrics, so the "
            "judge would grade nothing; remove one of the two flags."
        )
    chosen = {name: task_judges(configs[name], settings) for name in judged}
    for name, specs in chosen.items():
        if not specs:
            raise ConfigError(
                f"task {name} has judge metrics ({_judge_metrics()}): pass --judge-model NAME "
                "(and --judge-model-args) to grade them, or name the task's judge_model."
            )
    if flagged and not any(configs[name].judge_model is None for name in judged):
        reason = (
            "every task with judge metrics names its own judge_model"
            if judged
            else f"no task of this run has a judge metric ({_judge_metrics()})"
        )
        raise ConfigError(
            f"--judge-model {settings.judge_model}: {reason}; remove --judge-model"
            + (" or add a judge metric to a task's metric_list." if not judged else ".")
        )
    for specs in chosen.values():
        for spec in specs:
            if spec.model not in MODELS:
                # Before the evaluated model loads, not after its generations.
                flag = (
                    spec.source if spec.source.startswith("--") else f"{spec.source}: judge_model"
                )
                raise ConfigError(
                    f"{flag} {spec.model!r}: no such backend; choose one of "
                    f"{', '.join(MODELS.names())}."
                )
    for name, specs in chosen.items():
        if configs[name].judge_model is not None:
            instead = f", not --judge-model {settings.judge_model}" if flagged else ""
            log.warning(
                "task %s is graded by its own judge %s%s.",
                name,
                " and ".join(s.label() for s in specs),
                instead,
            )
    return chosen


class JudgeRole:
    """One judge model of a run with its executor and cache."""

    def __init__(
        self,
        spec: JudgeSpec,
        executor: Executor,
        cache: ResponseCache | None,
        seed: int | None = 0,
        meters_usage: bool = True,
    ) -> None:
        self.spec, self.executor, self.cache, self.seed = spec, executor, cache, seed
        self.meters_usage = meters_usage
        """Whether this process sends the judge's requests, so that its backend's usage
        counters (`LM.usage_stats`) see them (not so on Ray workers)."""

    @classmethod
    def build(
        cls,
        spec: JudgeSpec,
        settings: RunSettings,
        cache_path: Path | None,
        spending: SpendingLimit | None = None,
    ) -> JudgeRole:
        """The judge `spec` (its backend loaded now, under the run's `spending` limit where it
        spends), caching into `cache_path`."""
        source = judge_source(settings, spec.model, spec.model_args)
        executor = build_executor(settings, source=source, spending=spending)
        cache = ResponseCache(cache_path, executor.model.identity()) if cache_path else None
        return cls(spec, executor, cache, settings.seed.torch, settings.executor == "local")

    def identity(self) -> dict[str, Any]:
        """The judge backend's identity (recorded in results.json)."""
        return self.executor.model.identity()

    def judge(
        self,
        task: str,
        results: Sequence[DocResult],
        metrics: Sequence[JudgeMetric],
        filters: Sequence[str],
        stats: RunStats,
    ) -> list[Verdict]:
        """Judge a shard; the judge's request counts are added to `stats`."""

        def ask(requests: list[Any]) -> Sequence[object]:
            nonlocal stats
            model = self.executor.model
            before = model.usage_stats() if self.meters_usage else None
            try:
                answers = self.executor.run(requests, cache=self.cache)
            except FailedRequests as exc:
                raise ModelError(
                    f"task {task}: the judge model {self.spec.label()} failed on "
                    f"{len(exc.failures)} of {len(requests)} judge request(s); the task was not "
                    f"scored. Answers that arrived are in the response cache: re-run to ask "
                    f"only for the rest. Backend said: {exc}"
                ) from None
            if self.meters_usage:
                answers.stats.api_usage = usage_delta(before, model.usage_stats())
            stats += answers.stats
            return answers

        return judge_shard(results, metrics, filters, ask, self.seed)

    def close(self) -> None:
        """Release the judge's executor, backend and cache."""
        self.executor.close()
        self.executor.model.close()
        if self.cache is not None:
            self.cache.close()


class Judges:
    """The judges of a run, each built once however many tasks it grades."""

    def __init__(
        self,
        settings: RunSettings,
        cache_path: Path | None,
        spending: SpendingLimit | None = None,
    ) -> None:
        self.settings, self.cache_path = settings, cache_path
        self.spending = spending
        """The run's spending limit, which every judge backend that spends is built with."""
        self.roles: dict[str, JudgeRole] = {}

    def role(self, spec: JudgeSpec) -> JudgeRole:
        """The judge of `spec`, built on first use."""
        key = spec.key()
        if key not in self.roles:
            self.roles[key] = JudgeRole.build(spec, self.settings, self.cache_path, self.spending)
        return self.roles[key]

    def identities(self, specs: Iterable[JudgeSpec]) -> list[tuple[JudgeSpec, dict[str, Any]]]:
        """Each judge of `specs` (once, however many tasks name it) with its identity."""
        unique = {spec.key(): spec for spec in specs}
        return [(spec, self.role(spec).identity()) for spec in unique.values()]

    def close(self) -> None:
        """Release every judge."""
        for role in self.roles.values():
            role.close()


class TaskJudging:
    """The judging of one task: its judges, shard by shard, and what results.json reports."""

    def __init__(self, roles: Sequence[JudgeRole], metrics: Sequence[JudgeMetric]) -> None:
        self.roles, self.metrics = list(roles), list(metrics)
        self.stats = [RunStats() for _ in self.roles]
        self.tally = JudgeTally(two_judges=len(self.roles) > 1)

    def judge(
        self, task: str, results: Sequence[DocResult], filters: Sequence[str]
    ) -> list[dict[str, dict[str, Judgement]]]:
        """Judge a shard with every judge; returns each doc result's `judged` (per filter, the
        first judge's Judgement of each judge metric, with the second's attached)."""
        first = self.roles[0].judge(task, results, self.metrics, filters, self.stats[0])
        if len(self.roles) > 1:
            second = self.roles[1].judge(task, results, self.metrics, filters, self.stats[1])
            first = [
                replace(a, judgement=replace(a.judgement, second=b.judgement))
                for a, b in zip(first, second, strict=True)
            ]
        judged: dict[int, dict[str, dict[str, Judgement]]] = {id(r): {} for r in results}
        for verdict in first:
            by_filter = judged[id(verdict.result)].setdefault(verdict.filter, {})
            by_filter[verdict.metric.name] = verdict.judgement
            self.tally.add(verdict.metric, verdict.filter, verdict.judgement)
        return [judged[id(r)] for r in results]

    def record(self) -> list[dict[str, Any]]:
        """results.json's `assay.judges` entry of the task: each judge, its identity and the
        judge requests it was sent, answered from the cache and computed."""
        return [
            {
                "model": role.spec.model,
                "model_args": role.spec.model_args,
                "named_by": role.spec.source,
                "identity": role.identity(),
                "requests": stats.counts(),
            }
            for role, stats in zip(self.roles, self.stats, strict=True)
        ]
