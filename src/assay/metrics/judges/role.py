"""The judge role of a run: the judge model (`--judge-model`), its executor and cache.

The judge is any assay backend, built from the run's settings as the evaluated model is
(`execution.factory.build_executor`) and run through the same kind of executor, so batching,
concurrency limits and retries apply to it too. Its answers go to the run's response cache
under the judge's own identity (cache keys hold the model identity), so they never collide
with the evaluated model's and a re-run asks the judge nothing it already answered.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.errors import ConfigError, FailedRequests, ModelError
from assay.metrics.judges.grading import Judgement, JudgeMetric
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
    if not judged_tasks and settings.judge_model is not None and settings.predict_only:
        raise ConfigError(
            f"--judge-model {settings.judge_model}: --predict-only computes no metrics, so the "
            "judge would grade nothing; remove one of the two flags."
        )
    if not judged_tasks and settings.judge_model is not None:
        raise ConfigError(
            f"--judge-model {settings.judge_model}: no task of this run has a judge metric "
            "(judge_score, judge_pairwise, judge_correct); remove --judge-model or add one to "
            "a task's metric_list."
        )
    if settings.judge_model_args and settings.judge_model is None:
        raise ConfigError("--judge-model-args needs --judge-model NAME.")
    from assay.models.base import MODELS

    if settings.judge_model is not None and settings.judge_model not in MODELS:
        # Before the evaluated model loads, not after its generations.
        raise ConfigError(
            f"--judge-model {settings.judge_model!r}: no such backend; choose one of "
            f"{', '.join(MODELS.names())}."
        )


@dataclass
class _Column:
    unparsed: int = 0
    items: int = 0
    spread: float = 0.0
    """Sum over items of s_i^2 / k_i (s_i^2: the unbiased variance of the item's k_i parsed
    repeat scores); items judged once add nothing."""
    repeated: bool = False


@dataclass
class JudgeTally:
    """Per judge metric and filter of a task: unparseable verdicts and the judge's own noise.

    With judge_repeats K > 1, each item's value is the mean of its parsed repeats, so the
    task's stderr (over item values) already carries the judge's noise: the variance of a mean
    of per-item means is (sigma_items^2 + sigma_judge^2 / K) / n. The judge's share is reported
    on its own as ``<metric>_judge_se``: sqrt(sum_i s_i^2 / k_i) / n, over the n items with a
    parsed score.
    """

    columns: dict[tuple[str, str], _Column] = field(default_factory=dict)

    def add(self, metric: str, filter_name: str, judgement: Judgement) -> None:
        """Count one item's judgement."""
        col = self.columns.setdefault((metric, filter_name), _Column())
        if math.isnan(judgement.score):
            col.unparsed += 1
            return
        col.items += 1
        if len(judgement.repeat_scores) > 1:
            col.repeated = True
            kept = [v for v in judgement.repeat_scores if not math.isnan(v)]
            if len(kept) > 1:
                col.spread += statistics.variance(kept) / len(kept)

    def entries(self) -> dict[str, Any]:
        """The task entry's keys: ``<metric>_unparsed`` always, ``<metric>_judge_se`` with
        repeats."""
        out: dict[str, Any] = {}
        for (metric, name), col in self.columns.items():
            out[f"{metric}_unparsed,{name}"] = col.unparsed
            if col.repeated:
                se = math.sqrt(col.spread) / col.items if col.items else math.nan
                out[f"{metric}_judge_se,{name}"] = se
        return out


class JudgeRole:
    """The judge model of a run with its executor and cache."""

    def __init__(self, executor: Executor, cache: ResponseCache | None, seed: int = 0) -> None:
        self.executor, self.cache, self.seed = executor, cache, seed

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
        return cls(executor, cache, settings.seed)

    def identity(self) -> dict[str, Any]:
        """The judge backend's identity (recorded in results.json)."""
        return self.executor.model.identity()

    def judge(
        self,
        task: str,
        results: Sequence[DocResult],
        metrics: Sequence[JudgeMetric],
        filters: Sequence[str],
        tally: JudgeTally,
    ) -> None:
        """Judge a shard, adding its unparseable verdicts and repeat spreads to `tally`."""

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

        run_judges(results, metrics, filters, ask, self.seed)
        for result in results:
            for name, judged in result.judged.items():
                for metric, judgement in judged.items():
                    tally.add(metric, name, judgement)

    def close(self) -> None:
        """Release the judge's executor and cache."""
        self.executor.close()
        if self.cache is not None:
            self.cache.close()
