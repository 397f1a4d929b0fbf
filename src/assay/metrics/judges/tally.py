"""What a task's results report about its judges: unparseable verdicts, the judge's own noise
over repeated samples and, with two judges, how far they agree."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from assay.metrics.base import AGGREGATIONS
from assay.metrics.judges.grading import Judgement, JudgeMetric
from assay.stats.agreement import Level, cohen_kappa, krippendorff_alpha


@dataclass
class _Column:
    metric: JudgeMetric
    unparsed: int = 0
    items: int = 0
    spread: float = 0.0
    """Sum over items of s_i^2 / k_i (s_i^2: the unbiased variance of the item's k_i parsed
    sample scores); items judged once add nothing."""
    samples: list[list[float]] = field(default_factory=list)
    """Per item, the first judge's sample scores (self-agreement)."""
    scores: list[tuple[float, float]] = field(default_factory=list)
    """Per item, (first judge's score, second judge's score)."""
    labels: list[tuple[str, str]] = field(default_factory=list)
    """(first, second) categorical verdicts that both judges gave, prompt by prompt."""
    second_unparsed: int = 0


@dataclass
class JudgeTally:
    """Per judge metric and filter of a task: unparseable verdicts, the judge's own noise and,
    with two judges, their agreement.

    With judge_samples K > 1, each item's value is the mean of its parsed samples, so the
    task's stderr (over item values) already carries the judge's noise: the variance of a mean
    of per-item means is (sigma_items^2 + sigma_judge^2 / K) / n. The judge's share is reported
    on its own as ``<metric>_judge_se``: sqrt(sum_i s_i^2 / k_i) / n, over the n items with a
    parsed score.
    """

    two_judges: bool = False
    columns: dict[tuple[str, str], _Column] = field(default_factory=dict)

    def add(self, metric: JudgeMetric, filter_name: str, judgement: Judgement) -> None:
        """Count one item's judgement."""
        col = self.columns.setdefault((metric.name, filter_name), _Column(metric))
        col.samples.append(judgement.sample_scores)
        second = judgement.second
        if second is not None:
            col.scores.append((judgement.score, second.score))
            col.second_unparsed += math.isnan(second.score)
            for mine, theirs in zip(judgement.labels, second.labels, strict=True):
                col.labels += [
                    (a, b) for a, b in zip(mine, theirs, strict=True) if a is not None and b
                ]
        if math.isnan(judgement.score):
            col.unparsed += 1
            return
        col.items += 1
        kept = [v for v in judgement.sample_scores if not math.isnan(v)]
        if len(kept) > 1:
            col.spread += statistics.variance(kept) / len(kept)

    def entries(self) -> dict[str, Any]:
        """The task entry's keys: ``<metric>_unparsed`` always; with judge_samples > 1
        ``<metric>_judge_se`` and ``<metric>_self_alpha``; with two judges
        ``<metric>_second_judge``, ``<metric>_second_judge_unparsed``, ``<metric>_kappa`` and
        ``<metric>_alpha``."""
        out: dict[str, Any] = {}
        for (metric, name), col in self.columns.items():
            assert col.metric.grader is not None
            # YES/NO has no distance between values; scores, win rates and rubric points do.
            level: Level = "nominal" if col.metric.grader.kind == "correct" else "interval"
            out[f"{metric}_unparsed,{name}"] = col.unparsed
            if col.metric.grader.samples > 1:
                se = math.sqrt(col.spread) / col.items if col.items else math.nan
                out[f"{metric}_judge_se,{name}"] = se
                by_sample = [list(s) for s in zip(*col.samples, strict=True)]
                out[f"{metric}_self_alpha,{name}"] = krippendorff_alpha(by_sample, level)
            if self.two_judges:
                aggregate = AGGREGATIONS.get(col.metric.aggregation).fn
                firsts, seconds = [a for a, _ in col.scores], [b for _, b in col.scores]
                out[f"{metric}_second_judge,{name}"] = aggregate(seconds)
                out[f"{metric}_second_judge_unparsed,{name}"] = col.second_unparsed
                out[f"{metric}_kappa,{name}"] = cohen_kappa(
                    [a for a, _ in col.labels], [b for _, b in col.labels]
                )
                out[f"{metric}_alpha,{name}"] = krippendorff_alpha([firsts, seconds], level)
        return out
