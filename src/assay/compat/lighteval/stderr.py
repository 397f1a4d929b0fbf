"""lighteval's standard errors of its corpus-level metrics (`Aggregation.peer_stderr`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from assay.metrics.base import PeerStderr
from assay.metrics.stderr import NA, Stderr, bootstrap_replicates, sample_stddev

BOOTSTRAP_DRAWS = 1000
"""lighteval's bootstrap_iters (its default; its CLI does not expose it)."""


def lighteval_stderr(corpus: Callable[[Sequence[Any]], Any], mean: bool) -> PeerStderr:
    """lighteval's standard error of `corpus(values)`, and assay's where lighteval's is known
    wrong.

    lighteval picks the formula by the corpus function's name (`mean`: the name contains
    "mean"): such a function gets its `mean_stderr` (sample stddev / sqrt(n)), and nothing
    beside it; any other is bootstrapped, 1000 resamples drawn as
    `random.Random(0).choices(values, k=n)` draws them (the draws of `bootstrap_replicates`),
    and lighteval returns `mean_stderr` of the replicates: their standard deviation divided by
    sqrt(1000). The standard error is that standard deviation itself, returned second ("N/A"
    where lighteval's is "N/A"). Like lighteval: "N/A" for at most one value or with
    --bootstrap-iters 0.
    """

    def stderrs(values: Sequence[Any], bootstrap_iters: int) -> tuple[Stderr, Stderr | None]:
        from lighteval.metrics.utils.stderr import mean_stderr as lighteval_mean_stderr

        if bootstrap_iters <= 0 or len(values) <= 1:
            return NA, None if mean else NA
        if mean:
            return float(lighteval_mean_stderr(values)), None
        replicates = bootstrap_replicates(corpus, values, BOOTSTRAP_DRAWS)
        return float(lighteval_mean_stderr(replicates)), sample_stddev(replicates)

    return stderrs
