"""The judge role of a run: the judge model (`--judge-model`), its executor and cache.

The judge is any assay backend, built from the run's settings as the evaluated model is
(`execution.factory.build_executor`) and run through the same kind of executor, so batching,
concurrency limits and retries apply to it too. Its answers go to the run's response cache
under the judge's own identity (cache keys hold the model identity), so they never collide
with the evaluated model's and a re-run asks the judge nothing it already answered.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.errors import ConfigError, FailedRequests, ModelError
from assay.metrics.judges.grading import JudgeMetric
from assay.metrics.judges.stage import run_judges

if TYPE_CHECKING:
    from assay.execution.cache import ResponseCache
    from assay.execution.executor import Executor
    from assay.scoring import DocResult
    from assay.settings import RunSettings


def check_judge(settings: RunSettings, judged_tasks: Sequence[str]) -> None:
    """Refuse a run whose judge metrics have no judge model, or a judge model nothing uses."""
    if judged_tasks and settings.judge_model is None:
        raise ConfigError(
            f"task {judged_tasks[0]} has judge metrics (judge_score, judge_pairwise, "
            "judge_correct): pass --judge-model NAME (and --judge-model-args) to grade them."
        )
    if not judged_tasks and settings.judge_model is not None:
        raise ConfigError(
            f"--judge-model {settings.judge_model}: no task of this run has a judge metric "
            "(judge_score, judge_pairwise, judge_correct); remove --judge-model or add one to "
            "a task's metric_list."
        )
    if settings.judge_model_args and settings.judge_model is None:
        raise ConfigError("--judge-model-args needs --judge-model NAME.")


class JudgeRole:
    """The judge model of a run with its executor and cache."""

    def __init__(self, executor: Executor, cache: ResponseCache | None) -> None:
        self.executor, self.cache = executor, cache

    @classmethod
    def build(cls, settings: RunSettings, cache_path: Path | None) -> JudgeRole:
        """The judge of `settings` (its backend loaded now), caching into `cache_path`."""
        from assay.execution.cache import ResponseCache
        from assay.execution.factory import build_executor

        assert settings.judge_model is not None
        judge_settings = replace(
            settings,
            model=settings.judge_model,
            model_args=dict(settings.judge_model_args),
            batch_size=None,  # --batch-size and --device are the evaluated model's
            device=None,
        )
        executor = build_executor(judge_settings)
        cache = ResponseCache(cache_path, executor.model.identity()) if cache_path else None
        return cls(executor, cache)

    def identity(self) -> dict[str, Any]:
        """The judge backend's identity (recorded in results.json)."""
        return self.executor.model.identity()

    def judge(
        self,
        task: str,
        results: Sequence[DocResult],
        metrics: Sequence[JudgeMetric],
        filters: Sequence[str],
    ) -> dict[str, int]:
        """Judge a shard; return the number of unparseable verdicts per "metric,filter"."""

        def ask(requests: list[Any]) -> Sequence[object]:
            try:
                return list(self.executor.run(requests, cache=self.cache))
            except FailedRequests as exc:
                raise ModelError(
                    f"task {task}: the judge model failed on {len(exc.failures)} of "
                    f"{len(requests)} judge request(s); the task was not scored. Answers that "
                    f"arrived are in the response cache: re-run to ask only for the rest. "
                    f"Backend said: {exc}"
                ) from None

        run_judges(results, metrics, filters, ask)
        unparsed: dict[str, int] = {}
        for result in results:
            for name, judged in result.judged.items():
                for metric, judgement in judged.items():
                    key = f"{metric},{name}"
                    unparsed[key] = unparsed.get(key, 0) + math.isnan(judgement.score)
        return unparsed

    def close(self) -> None:
        """Release the judge's executor and cache."""
        self.executor.close()
        if self.cache is not None:
            self.cache.close()
