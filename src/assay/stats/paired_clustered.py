"""The clustered paired difference: CR2's standard error read against Bell-McCaffrey's t
(`stats.clustered`), and the mark on a comparison one cluster dominates."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import replace

import numpy as np

from assay.stats.clustered import cluster_degrees_of_freedom, cr2_variance_of_mean
from assay.stats.paired_result import TEST_SIGN_FLIP, PairedResult
from assay.stats.sign_flip import sign_flip_p
from assay.stats.thresholds import CLUMPED_CLUSTERS, SPARSE_DISCORDANT


def cr2_stderr(
    d: np.ndarray, clusters: Sequence[Hashable], count: int, tolerance: float
) -> tuple[float, float | None, str | None]:
    """CR2's standard error of mean(d), Bell-McCaffrey's degrees of freedom (None with fewer
    than two clusters) and, where the stderr is not estimated, why."""
    stderr = math.sqrt(cr2_variance_of_mean(d, clusters))
    df = None if count < 2 else cluster_degrees_of_freedom(clusters)
    if stderr <= tolerance:
        # Every cluster has the same mean difference (up to rounding): no spread between
        # the independent units, so no clustered variance (0 would claim it is known).
        return (
            math.nan,
            df,
            f"all {count} clusters have the same mean difference (up to rounding): with no "
            "spread between "
            "clusters the clustered variance cannot be estimated, so there is no stderr, "
            "interval or MDE",
        )
    return stderr, df, None


MAX_CLUSTER_SHARE = 0.93
"""Share of the docs above which one cluster makes the clustered interval unreliable."""


def mark_dominant_cluster(result: PairedResult, clusters: Sequence[Hashable]) -> PairedResult:
    """When one cluster holds more than `MAX_CLUSTER_SHARE` of the docs, the CR2 variance
    leans on the few docs outside it and Bell-McCaffrey's degrees of freedom cannot fall
    below about 1: the interval covers 0.44-0.89 (sizes 1000,1,1,1 to 200,5,5; the atlas), so
    it is marked, with the reason."""
    sizes: dict[str, int] = {}
    for c in clusters:
        sizes[str(c)] = sizes.get(str(c), 0) + 1
    largest = max(sizes.values())
    if largest <= MAX_CLUSTER_SHARE * result.n:
        return result
    return replace(
        result,
        note=f"one cluster holds {largest} of the {result.n} docs (more than "
        f"{MAX_CLUSTER_SHARE:.0%}): the clustered interval leans on the {result.n - largest} "
        "docs outside it and covers less than it claims (0.44-0.89 in "
        "benchmarks/coverage_atlas.py), so the interval, p-value and MDE are unreliable",
    )


def cluster_sums(d: np.ndarray, clusters: Sequence[Hashable], tolerance: float) -> np.ndarray:
    """The summed per-doc differences of the clusters whose sum differs from 0 by more than
    rounding (`tolerance` per doc): the independent units a clustered comparison rests on."""
    _, codes = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    sums = np.bincount(codes, weights=d)
    sizes = np.bincount(codes)
    return sums[np.abs(sums) > tolerance * sizes]


def few_differing_clusters(result: PairedResult, sums: np.ndarray) -> PairedResult:
    """Fewer than `SPARSE_DISCORDANT` clusters whose differences do not cancel: as with few
    differing docs, the p-value (and `*`) is the exact sign-flip test over the cluster sums,
    and the CR2 interval beside it is marked (sparse 0/1 differences in 100 clusters of 10
    covered 0.80-0.88 with it)."""
    count = len(sums)
    return replace(
        result,
        p_value=sign_flip_p(sums),
        test=TEST_SIGN_FLIP,
        note=f"only {count} of the {result.clusters} clusters have differences that do not "
        f"cancel (fewer than {SPARSE_DISCORDANT}): the p-value is the exact sign-flip test over "
        "those cluster sums; the CR2 interval and MDE beside it lean on those few clusters "
        "and may cover less than they claim (benchmarks/coverage_atlas.py)",
    )


def clumped_clusters(result: PairedResult, sums: np.ndarray) -> PairedResult:
    """Cluster sums that fall in two clumps (Sarle's bimodality coefficient (g1² + 1) / kurtosis
    above `CLUMPED_CLUSTERS`; a two-point mix has 1 whatever its proportions, a normal 1/3)
    mark the CR2 interval: a few clusters carry the effect, and how many of them a sample
    holds moves the estimate and the clumps' skewness together, so a rule on the skewness
    alone left unmarked exactly the draws whose estimate sat far above the truth (26-30
    clusters, a quarter shifted: 0.84 coverage unmarked). The coefficient reads the shape
    alone, not how many clusters are in each clump."""
    centred = sums - sums.mean()
    spread = float(np.mean(centred**2))
    if len(sums) < 4 or spread <= 0:
        return result
    skewness = float(np.mean(centred**3)) / spread**1.5
    kurtosis = float(np.mean(centred**4)) / spread**2
    coefficient = (skewness**2 + 1) / kurtosis
    if coefficient <= CLUMPED_CLUSTERS:
        return result
    return replace(
        result,
        note=f"the {len(sums)} cluster sums fall in two clumps (bimodality coefficient "
        f"{coefficient:.2f}, above {CLUMPED_CLUSTERS}): a few clusters carry the difference, and "
        "the clustered interval covers less than it claims there (0.84 with a quarter of 26-30 "
        "clusters shifted), so the interval, p-value and MDE are unreliable",
    )
