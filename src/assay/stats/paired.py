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

Where the sample cannot estimate a statistic (no docs, one doc, one cluster, every difference
the same, every bootstrap resample the same) the statistic is NaN and `PairedResult.note` says
why; it is never reported as 0. For 0/1 metrics whose differences show no spread, an exact
bound stands in (`assay.stats.exact`): the interval then bounds the difference by the
Clopper-Pearson bound on the share of docs that could differ, and the MDE uses the variance
bound it gives; the note names the substitute.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import replace

import numpy as np

from assay.stats.clustered import cluster_count
from assay.stats.normal import check_confidence
from assay.stats.paired_binary import clipped, exact_binary, is_binary, mcnemar_exact, within_range
from assay.stats.paired_bootstrap import paired_bootstrap
from assay.stats.paired_clustered import (
    clumped_clusters,
    cluster_sums,
    cr2_stderr,
    few_differing_clusters,
    mark_dominant_cluster,
)
from assay.stats.paired_constant import (
    constant_difference,
    describe_constant,
    no_spread,
    rounding_tolerance,
)
from assay.stats.paired_normal import (
    combine_unweighted,
    mark_skewed,
    no_stderr_reason,
    normal_result,
    not_finite,
    overflowed,
)
from assay.stats.paired_result import METHOD_CLUSTERED, METHOD_PAIRED, PairedResult
from assay.stats.sign_flip import sign_flip_p, sparse_differences
from assay.stats.thresholds import SMALL_NORMAL, SPARSE_DISCORDANT

__all__ = [
    "PairedResult",
    "combine_unweighted",
    "describe_constant",
    "mcnemar_exact",
    "no_spread",
    "paired_bootstrap",
    "paired_mean",
    "rounding_tolerance",
    "sign_flip_p",
]


def paired_mean(
    a: Sequence[float],
    b: Sequence[float],
    *,
    clusters: Sequence[Hashable] | None = None,
    confidence: float = 0.95,
) -> PairedResult:
    """Compare mean(b) with mean(a) over paired per-doc values (see the module docstring).

    With no spread in the differences (one doc, or all alike) there is no stderr: for 0/1
    values the interval is the exact bound of `assay.stats.exact` and the MDE comes from its
    variance bound, otherwise both are NaN; p_value is exactly 1.0 when every difference is 0,
    McNemar's exact (sign test) p-value when they are all +1 or all -1, NaN otherwise.
    0/1 values with fewer than `SPARSE_DISCORDANT` differing docs (unclustered) get the exact
    interval and McNemar's exact p-value (`paired_binary_exact`, method paired-exact). With
    clusters the stderr is CR2's, read against t with
    Bell-McCaffrey degrees of freedom (G - 1 for equal clusters). A value that is not finite leaves
    every statistic NaN, with a note counting the docs that hold one. For 0/1 values the MDE
    respects the variance floor δ(1 - δ) and is NaN (with a note) beyond 1.
    """
    check_confidence(confidence)
    x, y = _paired_arrays(a, b, clusters)
    n = len(x)
    if clusters is not None and n and cluster_count(clusters) == n:
        # One doc per cluster is the unclustered comparison, guards included (CR2 on singleton
        # clusters would skip them); the method column says which test ran.
        return replace(paired_mean(a, b, confidence=confidence), clusters=n)
    method = METHOD_PAIRED if clusters is None else METHOD_CLUSTERED
    count = None if clusters is None else cluster_count(clusters)
    unfinite = int((~(np.isfinite(x) & np.isfinite(y))).sum())
    if unfinite:
        return not_finite(n, x, y, unfinite, confidence, count, method)
    with np.errstate(over="ignore", invalid="ignore"):
        d = y - x
        mean_a, mean_b = (float(x.mean()), float(y.mean())) if n else (math.nan, math.nan)
        spread = float(np.square(d - d.mean()).sum()) if n else 0.0
    if n and not (
        np.isfinite(d).all() and math.isfinite(mean_a + mean_b) and math.isfinite(spread)
    ):
        # Finite values whose differences or squares overflow: every statistic but the
        # p-value is linear in the scale, so they are computed on the values over the largest.
        scale = float(np.abs(np.concatenate([x, y])).max())
        scaled = paired_mean(
            (x / scale).tolist(), (y / scale).tolist(), clusters=clusters, confidence=confidence
        )
        return overflowed(scaled, scale)
    # McNemar's test assumes independent docs: a clustered row is read against CR2's t alone.
    mcnemar_p = mcnemar_exact(a, b) if clusters is None else None
    binary = is_binary(a) and is_binary(b)
    if n and no_spread(d, x, y):
        result = constant_difference(
            n,
            mean_a,
            mean_b,
            d,
            rounding_tolerance(x, y),
            confidence,
            binary=binary,
            mcnemar_p=mcnemar_p,
            clusters=count,
            method=method,
        )
        return within_range(result, binary)
    if clusters is None and binary:
        return within_range(exact_binary(mean_a, mean_b, d, confidence, mcnemar_p), True)
    differing = d[np.abs(d) > rounding_tolerance(x, y)]
    if clusters is None and len(differing) < SPARSE_DISCORDANT:
        return sparse_differences(n, mean_a, mean_b, d, differing, confidence)
    df = None
    note = None
    if clusters is not None:
        stderr, df, note = cr2_stderr(d, clusters, count or 0, rounding_tolerance(x, y))
        sums = cluster_sums(d, clusters, rounding_tolerance(x, y))
    else:
        stderr = float(d.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    if math.isnan(stderr) and note is None:
        note = no_stderr_reason(n, count)
    result = normal_result(
        n,
        mean_a,
        mean_b,
        stderr,
        confidence,
        no_difference=note is not None and mean_b - mean_a == 0,
        mcnemar_p=mcnemar_p,
        clusters=count,
        method=method,
        note=note,
        df=df,
    )
    if clusters is not None and result.note is None:
        result = mark_dominant_cluster(result, clusters)
    if clusters is not None and result.note is None and len(sums) < SPARSE_DISCORDANT:
        result = few_differing_clusters(result, sums)
    if clusters is not None and result.note is None:
        result = mark_skewed(result, sums, sums, unit="clusters")
    if clusters is not None and result.note is None:
        result = clumped_clusters(result, sums)
    if clusters is None and result.note is None and n < SMALL_NORMAL:
        result = replace(
            result,
            note=f"{n} docs: below {SMALL_NORMAL} the normal interval on values that are not "
            "0/1 covers less than it claims (87 % at 5 docs, benchmarks/coverage_atlas.py): "
            "the interval, p-value and MDE are optimistic",
        )
    if clusters is None and result.note is None:
        result = mark_skewed(result, d, differing)
    if binary:
        result = clipped(result)
    return within_range(result, binary)


def _paired_arrays(
    a: Sequence[float], b: Sequence[float], clusters: Sequence[Hashable] | None
) -> tuple[np.ndarray, np.ndarray]:
    if len(a) != len(b):
        raise ValueError(f"{len(a)} values for run a but {len(b)} for run b")
    if clusters is not None and len(clusters) != len(a):
        raise ValueError(f"{len(a)} values but {len(clusters)} cluster labels")
    return np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
