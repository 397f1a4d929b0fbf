"""Paired comparisons of two runs scored on the same docs.

Both runs answered the same questions, so the question to ask is about the per-doc differences
d_i = b_i - a_i, not about two separate means: the difficulty of each doc cancels out and the
interval on mean(b) - mean(a) is much narrower than two overlapping intervals suggest (Miller
2024, "Adding Error Bars to Evals", §4).

- Metrics aggregated by a mean (`paired_mean`): stderr = sd(d)/√n (n - 1 in sd), or Miller's
  clustered form when docs share a context; a normal interval diff ∓ z·stderr; the two-sided
  p-value 2·(1 - Φ(|diff|/stderr)); for 0/1 metrics also McNemar's exact test.
- Corpus-level metrics (f1, bleu, perplexity, ...: an aggregation over all docs, not a mean of
  per-doc values) (`paired_bootstrap`): a seeded bootstrap that resamples docs (or whole
  clusters) with the same indices for both runs and recomputes the aggregation on each.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from assay.stats.clustered import cluster_count, clustered_stderr
from assay.stats.normal import check_confidence, two_sided_p, two_sided_z
from assay.stats.power import mde

METHOD_PAIRED = "paired"
METHOD_CLUSTERED = "paired-clustered"
METHOD_BOOTSTRAP = "paired-bootstrap"
METHOD_CLUSTER_BOOTSTRAP = "paired-cluster-bootstrap"


@dataclass(frozen=True)
class PairedResult:
    """One paired comparison of run b against run a. NaN where a statistic is undefined
    (fewer than two docs)."""

    n: int
    """Docs paired."""
    mean_a: float
    mean_b: float
    diff: float
    """mean_b - mean_a (for corpus-level metrics: aggregate(b) - aggregate(a))."""
    stderr: float
    """Standard error of diff."""
    ci_low: float
    ci_high: float
    confidence: float
    p_value: float
    """Two-sided p-value of "no difference"."""
    mcnemar_p: float | None
    """McNemar's exact two-sided p-value, for 0/1 metrics only."""
    mde: float
    """Smallest true difference detected with 80 % power at level 1 - confidence."""
    clusters: int | None
    """Distinct clusters (None: docs treated as independent)."""
    method: str
    """paired, paired-clustered, paired-bootstrap or paired-cluster-bootstrap."""


def paired_mean(
    a: Sequence[float],
    b: Sequence[float],
    *,
    clusters: Sequence[Hashable] | None = None,
    confidence: float = 0.95,
) -> PairedResult:
    """Compare mean(b) with mean(a) over paired per-doc values (see the module docstring).

    p_value is exactly 1.0 when every difference is 0, and 0.0 when the differences are a
    nonzero constant (no spread, so no doubt).
    """
    check_confidence(confidence)
    x, y = _paired_arrays(a, b, clusters)
    n = len(x)
    d = y - x
    if clusters is not None:
        stderr = clustered_stderr(d, clusters)
        method, count = METHOD_CLUSTERED, cluster_count(clusters)
    else:
        stderr = float(d.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
        method, count = METHOD_PAIRED, None
    return _normal_result(
        n,
        float(x.mean()) if n else math.nan,
        float(y.mean()) if n else math.nan,
        stderr,
        confidence,
        no_difference=bool(n) and not d.any(),
        mcnemar_p=mcnemar_exact(a, b),
        clusters=count,
        method=method,
    )


def combine_unweighted(parts: Sequence[PairedResult], confidence: float = 0.95) -> PairedResult:
    """A group that averages its tasks without weights: diff = the mean of the tasks' diffs,
    stderr = sqrt(Σ stderr_t²)/k (independent tasks), the normal interval and p-value on
    those; method "<the tasks' method>-unweighted"."""
    if not parts:
        raise ValueError("no task comparisons to combine")
    k = len(parts)
    stderr = math.sqrt(sum(p.stderr**2 for p in parts)) / k
    counts = [p.clusters for p in parts]
    return _normal_result(
        sum(p.n for p in parts),
        sum(p.mean_a for p in parts) / k,
        sum(p.mean_b for p in parts) / k,
        stderr,
        confidence,
        no_difference=all(p.p_value == 1.0 and p.diff == 0 and p.stderr == 0 for p in parts),
        mcnemar_p=None,
        clusters=None if any(c is None for c in counts) else sum(c or 0 for c in counts),
        method=f"{parts[0].method}-unweighted",
    )


def _normal_result(
    n: int,
    mean_a: float,
    mean_b: float,
    stderr: float,
    confidence: float,
    *,
    no_difference: bool,
    mcnemar_p: float | None,
    clusters: int | None,
    method: str,
) -> PairedResult:
    """The normal-approximation statistics of a difference with this standard error."""
    diff = mean_b - mean_a
    z = two_sided_z(confidence)
    return PairedResult(
        n=n,
        mean_a=mean_a,
        mean_b=mean_b,
        diff=diff,
        stderr=stderr,
        ci_low=diff - z * stderr,
        ci_high=diff + z * stderr,
        confidence=confidence,
        p_value=_normal_p(no_difference, diff, stderr),
        mcnemar_p=mcnemar_p,
        mde=mde(stderr, confidence),
        clusters=clusters,
        method=method,
    )


def _normal_p(no_difference: bool, diff: float, stderr: float) -> float:
    if no_difference:
        return 1.0
    if math.isnan(stderr):
        return math.nan
    if stderr == 0:
        return 0.0
    return two_sided_p(diff / stderr)


def mcnemar_exact(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    """McNemar's exact test: the two-sided binomial test (p = 1/2) on the discordant pairs,
    min(1, 2·P(X ≤ min(n01, n10))) with X ~ Bin(n01 + n10, 1/2); 1.0 without discordant pairs.
    None unless every value of both runs is 0 or 1."""
    if not _binary(a) or not _binary(b):
        return None
    only_a = sum(1 for x, y in zip(a, b) if x == 1 and y == 0)
    only_b = sum(1 for x, y in zip(a, b) if x == 0 and y == 1)
    discordant = only_a + only_b
    if discordant == 0:
        return 1.0
    # scipy's binomial CDF (a regularised incomplete beta), not a sum of exact binomial
    # coefficients: that sum grows with the square of the discordant count (minutes at 100k docs).
    from scipy.stats import binom

    return float(min(1.0, 2 * binom.cdf(min(only_a, only_b), discordant, 0.5)))


def _binary(values: Sequence[Any]) -> bool:
    # bool is an int: True and False count as 1 and 0.
    return bool(values) and all(isinstance(v, int | float) and v in (0, 1) for v in values)


def paired_bootstrap(
    a: Sequence[Any],
    b: Sequence[Any],
    aggregate: Callable[[Sequence[Any]], float],
    *,
    clusters: Sequence[Hashable] | None = None,
    confidence: float = 0.95,
    iters: int = 1000,
    seed: int = 1234,
) -> PairedResult:
    """Compare aggregate(b) with aggregate(a) for a corpus-level aggregation.

    Each of `iters` replicates draws n docs with replacement (with clusters: as many clusters
    as there are, with replacement, keeping each drawn cluster's docs), the same draw for both
    runs, from `numpy.random.default_rng(seed)`; draw r is `rng.integers(0, units, units)` in
    order. diff* = aggregate(b*) - aggregate(a*) per replicate; stderr = sd(diff*) (n - 1);
    the interval is the percentile interval of diff*; the p-value is the two-sided
    min(1, 2·(min(#{diff* ≤ 0}, #{diff* ≥ 0}) + 1)/(iters + 1)), which is 1.0 for identical
    runs and never 0.
    """
    check_confidence(confidence)
    if iters < 2:
        raise ValueError(f"iters must be at least 2, got {iters!r}")
    if len(a) != len(b):
        raise ValueError(f"{len(a)} values for run a but {len(b)} for run b")
    n = len(a)
    diff = float(aggregate(b)) - float(aggregate(a)) if n else math.nan
    if clusters is not None:
        if len(clusters) != n:
            raise ValueError(f"{n} values but {len(clusters)} cluster labels")
        members = _cluster_members(clusters)
        method, count = METHOD_CLUSTER_BOOTSTRAP, len(members)
    else:
        members = [np.asarray([i]) for i in range(n)]
        method, count = METHOD_BOOTSTRAP, None
    rng = np.random.default_rng(seed)
    replicates = np.empty(iters)
    units = len(members)
    for r in range(iters):
        drawn = rng.integers(0, units, units)
        rows = np.concatenate([members[u] for u in drawn]) if units else np.asarray([], int)
        replicates[r] = float(aggregate([b[i] for i in rows])) - float(
            aggregate([a[i] for i in rows])
        )
    if n < 2:
        stderr = low = high = p_value = math.nan
    else:
        stderr = float(replicates.std(ddof=1))
        tail = (1 - confidence) / 2
        low, high = (float(q) for q in np.quantile(replicates, [tail, 1 - tail]))
        below, above = int((replicates <= 0).sum()), int((replicates >= 0).sum())
        p_value = min(1.0, 2 * (min(below, above) + 1) / (iters + 1))
    return PairedResult(
        n=n,
        mean_a=float(aggregate(a)) if n else math.nan,
        mean_b=float(aggregate(b)) if n else math.nan,
        diff=diff,
        stderr=stderr,
        ci_low=low,
        ci_high=high,
        confidence=confidence,
        p_value=p_value,
        mcnemar_p=None,
        mde=mde(stderr, confidence),
        clusters=count,
        method=method,
    )


def _cluster_members(clusters: Sequence[Hashable]) -> list[np.ndarray]:
    """Doc indices per cluster, clusters in order of first appearance."""
    index: dict[str, list[int]] = {}
    for i, c in enumerate(clusters):
        index.setdefault(str(c), []).append(i)
    return [np.asarray(rows) for rows in index.values()]


def _paired_arrays(
    a: Sequence[float], b: Sequence[float], clusters: Sequence[Hashable] | None
) -> tuple[np.ndarray, np.ndarray]:
    if len(a) != len(b):
        raise ValueError(f"{len(a)} values for run a but {len(b)} for run b")
    if clusters is not None and len(clusters) != len(a):
        raise ValueError(f"{len(a)} values but {len(clusters)} cluster labels")
    return np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
