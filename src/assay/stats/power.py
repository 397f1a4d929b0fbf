"""Power analysis for paired comparisons (Miller 2024, §5): how many docs a comparison needs to
detect a difference, and the smallest difference a given comparison can detect.

A paired comparison of two models on n docs estimates the mean of the per-doc differences d,
whose standard error is sd(d)/√n. A two-sided test at level α = 1 - confidence detects a true
difference δ with probability `power` when

    δ ≥ (z_{1-α/2} + z_{power}) · sd(d)/√n,

which gives the minimum detectable effect (MDE) of a comparison and, solved for n, the docs
needed for a target δ.

Sampled generation adds noise within each doc: with per-sample score variance V within a doc
(for a 0/1 metric, the mean of p_i(1 - p_i) over docs), averaging K samples per doc per model
leaves Var(d) = Var₁(d) - 2V(1 - 1/K), where Var₁(d) is the variance with one sample each.

For 0/1 scores the difference to detect bounds the variance from below: a true difference δ
means at least |δ| of the docs differ, so Var(d) ≥ |δ|(1 - |δ|) whatever a sample showed
(`binary_variance_floor`). Planning on a smaller variance (two all-wrong runs give an exact
bound near 3/n) under-plans many times over.
"""

from __future__ import annotations

import math

from assay.stats.normal import check_confidence, two_sided_z, z_quantile
from assay.stats.thresholds import SMALL_NORMAL, SPARSE_DISCORDANT


def _z_sum(confidence: float, power: float, df: float | None = None) -> float:
    check_confidence(confidence)
    if not 0 < power < 1:
        raise ValueError(f"power must be between 0 and 1 (exclusive), got {power!r}")
    if df is None:
        return two_sided_z(confidence) + z_quantile(power)
    from scipy.stats import t

    return float(t.ppf(1 - (1 - confidence) / 2, df) + t.ppf(power, df))


def mde(
    stderr: float, confidence: float = 0.95, power: float = 0.8, df: float | None = None
) -> float:
    """The smallest true difference detected with probability `power` by a two-sided test at
    level 1 - confidence, for an estimate with this standard error (NaN for a NaN one: a
    standard error that could not be estimated gives no MDE); with `df`, read against
    Student's t with df degrees of freedom (a clustered comparison: Bell-McCaffrey's)."""
    if stderr < 0:
        raise ValueError(f"a standard error must be >= 0, got {stderr!r}")
    return _z_sum(confidence, power, df) * stderr


def binary_variance_floor(difference: float) -> float:
    """The least Var(d) of paired 0/1 scores whose mean difference is `difference`:
    |δ|(1 - |δ|) (at least |δ| of the docs differ)."""
    size = min(1.0, abs(difference))
    return size * (1.0 - size)


def docs_needed(
    diff_variance: float, difference: float, confidence: float = 0.95, power: float = 0.8
) -> int:
    """Docs n for which a paired comparison detects `difference` with probability `power`:
    the smallest n with (z_{1-α/2} + z_power)·sqrt(diff_variance / n) ≤ |difference|.

    The variance must be positive: a variance of 0 (or NaN), as a sample without spread
    shows, would plan a single doc; give an upper bound instead (`assay.stats.exact`)."""
    if difference == 0:
        raise ValueError("the difference to detect must not be 0")
    if not diff_variance > 0:
        raise ValueError(
            f"variance must be > 0, got {diff_variance!r}: a sample without spread does not "
            "estimate it; plan on an upper bound"
        )
    exact = (_z_sum(confidence, power) ** 2) * diff_variance / difference**2
    # The rounding guard keeps an exact integer (up to float noise) from becoming the next one.
    return max(1, math.ceil(exact - 1e-9))


def paired_diff_variance(var_a: float, var_b: float, correlation: float) -> float:
    """Var(b - a) of two per-doc scores with these variances and correlation."""
    if not -1 <= correlation <= 1:
        raise ValueError(f"correlation must be between -1 and 1, got {correlation!r}")
    return var_a + var_b - 2 * correlation * math.sqrt(var_a * var_b)


def with_repeats(diff_variance: float, within_variance: float, repeats: int) -> float:
    """Var(d) when each model's per-doc score averages `repeats` samples, from the variance
    with one sample each and the per-sample variance within a doc (see the module docstring)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats!r}")
    if within_variance < 0 or 2 * within_variance > diff_variance + 1e-12:
        raise ValueError(
            f"within-doc variance {within_variance!r} must lie between 0 and half the variance "
            f"of the differences ({diff_variance!r})"
        )
    return diff_variance - 2 * within_variance * (1 - 1 / repeats)


def least_normal_docs(differing_share: float = 1.0) -> int:
    """The fewest docs a plan for values that are not 0/1 may give: `assay compare` reads them
    against the normal (the formula's test) only from `SMALL_NORMAL` docs with
    `SPARSE_DISCORDANT` differing; where a share of the docs differ, that many differing docs
    take SPARSE_DISCORDANT / share docs. Below, compare decides by the exact sign-flip test
    (no p < 0.05 below 6 differing docs), whose power the normal formula does not give."""
    if not 0 < differing_share <= 1:
        raise ValueError(
            f"the share of docs that differ must lie in (0, 1], got {differing_share!r}"
        )
    return max(SMALL_NORMAL, math.ceil(SPARSE_DISCORDANT / differing_share - 1e-9))


def other_docs_needed(
    diff_variance: float,
    difference: float,
    confidence: float = 0.95,
    power: float = 0.8,
    differing_share: float = 1.0,
) -> tuple[int, bool]:
    """Docs a comparison of values that are not 0/1 needs, with the test `assay compare` runs
    at that n: `docs_needed`, raised to `least_normal_docs`; and whether it was raised."""
    needed = docs_needed(diff_variance, difference, confidence, power)
    least = least_normal_docs(differing_share)
    return max(needed, least), needed < least


def clusters_needed(
    cluster_variance: float, difference: float, confidence: float = 0.95, power: float = 0.8
) -> int:
    """Clusters G for which a clustered comparison detects `difference` with probability
    `power`: the smallest G with (t_{1-α/2, G-1} + t_{power, G-1})·sqrt(cluster_variance / G)
    ≤ |difference|, where `cluster_variance` is the variance of one cluster's mean difference
    (G times CR2's variance of the mean). Never below the count at which compare's test for
    fewer than `SPARSE_DISCORDANT` clusters, the exact sign-flip test over cluster sums, can
    reach the level at all (its least p is 2/2^G: 6 clusters at 95 %). `assay compare` reads a
    clustered mean with CR2's standard error against t with G - 1 degrees of freedom (equal
    clusters), so the plan counts clusters, not docs."""
    if difference == 0:
        raise ValueError("the difference to detect must not be 0")
    if not cluster_variance > 0:
        raise ValueError(f"variance must be > 0, got {cluster_variance!r}")
    alpha = 1 - confidence
    least = max(2, math.ceil(1 + math.log2(1 / alpha) - 1e-9))
    start = max(least, docs_needed(cluster_variance, difference, confidence, power))
    # t's quantiles exceed z's, so the normal answer is a lower bound; t(G-1) approaches z
    # fast, so the walk up is short (bounded all the same).
    for clusters in range(start, start + 100_000):
        spread = math.sqrt(cluster_variance / clusters)
        if _z_sum(confidence, power, clusters - 1) * spread <= abs(difference) * (1 + 1e-12):
            return clusters
    raise ValueError(f"no cluster count up to {start + 100_000} reaches the power")
