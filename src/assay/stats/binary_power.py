"""The power of the test `assay compare` runs on paired 0/1 scores, computed exactly, and the
docs a comparison needs for it (`assay power` with 0/1 metrics).

The normal formula of `stats.power` (n = (z_{1-α/2} + z_power)²·Var(d)/δ²) assumes the
comparison is read against the normal. For 0/1 scores `paired_mean` is not: the row's p-value
(and its `*`) is McNemar's exact test, which is conservative with few differing docs, so a plan
on the normal formula falls short of its power (0.69 at the 150 docs it plans for two all-wrong
runs, benchmarks/coverage_atlas.py). This module computes the power of the test `paired_mean`
actually runs, without simulation:

A planned variance V and difference δ fix the share of docs that differ, ψ = V + δ² (paired 0/1
differences are -1, 0 or +1, so Var(d) = ψ - δ²), and the share of those that favour b,
π = (ψ + δ)/(2ψ). Over n docs the differing count D is Binomial(n, ψ) and, given D, the count
favouring b is Binomial(D, π). For each (D, k) the rejection is decided as `paired_mean` decides
it, by McNemar's exact p-value; power is the probability of a rejection in δ's direction.

The share of docs that differ (the discordance ψ) is what the plan assumes: a plan on the least
possible one, ψ = |δ| (every differing doc favours one side), is the fewest docs any comparison
could need, not the docs a comparison with two-way differences needs (10 % of docs one way and
5 % the other reach 0.33 power at the 157 docs ψ = 0.05 plans). `assay power` says which
discordance it planned on and takes `--discordance`.
"""

from __future__ import annotations

import math

import numpy as np

from assay.stats.normal import check_confidence

_TAIL = 1e-12
"""Probability mass of the differing count left out at each end (far below any power shown)."""


def discordance(variance: float, difference: float) -> tuple[float, float]:
    """(ψ, π): the share of docs that differ and the share of those favouring the side the
    difference favours, for paired 0/1 scores with Var(d) = `variance` and mean `difference`.
    ψ is at least |δ| (the variance floor) and at most 1."""
    size = abs(difference)
    share = min(1.0, max(size, variance + size * size))
    return share, (share + size) / (2 * share)


def exact_power(n: int, variance: float, difference: float, confidence: float = 0.95) -> float:
    """Probability that `paired_mean` on n docs of paired 0/1 scores finds a difference in
    δ's direction at level 1 - confidence (see the module docstring)."""
    from scipy.stats import binom

    check_confidence(confidence)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    if difference == 0:
        raise ValueError("the difference to detect must not be 0")
    share, favour = discordance(variance, difference)
    alpha = 1 - confidence
    counts = np.arange(max(1, int(binom.ppf(_TAIL, n, share))), int(binom.isf(_TAIL, n, share)) + 1)
    counts = counts[counts <= n]
    # The fewest docs favouring δ's side that reject, per differing count D, by McNemar's
    # exact test: 2·P(X <= D - k) < α, X ~ Bin(D, 1/2), i.e. D - k < the α/2 quantile of X.
    fewest = counts - binom.ppf(alpha / 2, counts, 0.5) + 1
    fewest = np.maximum(fewest, np.floor(counts / 2) + 1)  # a rejection in δ's direction
    reach = binom.sf(fewest - 1, counts, favour)
    # Every doc differing the same way (D = n) has no spread: paired_mean's exact sign test.
    sign = (counts == n) & (fewest > n) & (2 * 0.5**n < alpha)
    reach = reach + np.where(sign, binom.pmf(counts, counts, favour), 0.0)
    return float((binom.pmf(counts, n, share) * reach).sum())


def exact_mde(n: int, variance: float, confidence: float = 0.95, power: float = 0.8) -> float:
    """The MDE of n paired 0/1 scores whose differences have this variance: the smallest δ
    (to 1e-4, by bisection) at which `exact_power` reaches `power`, the discordance kept at
    what the variance and δ imply (`discordance`). NaN where even δ = 1 falls short (few docs)
    or the variance is not a number."""
    if not n >= 1 or not math.isfinite(variance):
        return math.nan
    variance = max(0.0, variance)
    high = 1.0 - 1e-9
    if exact_power(n, variance, high, confidence) < power:
        return math.nan
    low = 0.0
    while high - low > 1e-4:
        middle = (low + high) / 2
        if exact_power(n, variance, middle, confidence) >= power:
            high = middle
        else:
            low = middle
    return high


def binary_docs_needed(
    variance: float, difference: float, confidence: float = 0.95, power: float = 0.8
) -> int:
    """The smallest n (found by doubling, then bisection, from the normal formula's n) at which
    `exact_power` reaches `power`: the docs a 0/1 comparison needs with the test assay runs.
    The variance is floored at δ(1 - δ) (`discordance`)."""
    from assay.stats.power import binary_variance_floor, docs_needed

    if not 0 < power < 1:
        raise ValueError(f"power must be between 0 and 1 (exclusive), got {power!r}")
    planned = max(variance, binary_variance_floor(difference))
    low = docs_needed(planned, difference, confidence, power)
    if exact_power(low, planned, difference, confidence) >= power:
        return low
    high = low
    while exact_power(high, planned, difference, confidence) < power:
        low, high = high, 2 * high
        if high > 1 << 26:
            raise ValueError(f"no n up to {high} reaches power {power:g}")
    while high - low > 1:
        middle = (low + high) // 2
        if exact_power(middle, planned, difference, confidence) >= power:
            high = middle
        else:
            low = middle
    return high
