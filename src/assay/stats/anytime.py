"""Anytime-valid confidence sequences for a mean under sampling without replacement.

An evaluation scores the rows of a finite dataset (N rows) in a random order and looks at its
running estimate after every shard. A fixed-sample interval (normal, Wilson, Hoeffding) covers
the truth with probability 1 - α at *one* look chosen in advance; looked at after every shard,
the chance that it misses at some look is much larger, and decisions taken on it (stop a config,
keep the best) inherit that error. A confidence sequence (C_t) instead satisfies

    P(μ ∈ C_t for every t = 1, ..., N) >= 1 - α,

so it may be looked at, and acted on, after every row or shard. This module implements the
confidence sequences of Waudby-Smith & Ramdas, "Confidence sequences for sampling without
replacement" (NeurIPS 2020), for values in a known range [a, b] (rescaled to [0, 1] here).

Under sampling without replacement, if the population mean is m, the mean of the rows not yet
drawn after n rows with sum S is

    μ_t(m) = (N·m - S) / (N - n),

and an observation Y_t (one row's score, or the mean of a batch of rows drawn together) has
conditional mean μ_t(m) given the past. Two forms test every candidate m at once:

- ``betting`` (the hedged capital process): K⁺_t(m) = Π (1 + λ_i (Y_i - μ_i(m))) and
  K⁻_t(m) = Π (1 - λ_i (Y_i - μ_i(m))) are nonnegative martingales when m is the truth, so by
  Ville's inequality max(K⁺, K⁻)/2 exceeds 1/α at some t with probability at most α; C_t is
  every m not yet rejected. Bets λ_i are the predictable plug-in of the paper,
  sqrt(2 log(2/α) / (σ̂²_{i-1} · i · log(1 + i))) capped at 1/2, from a regularised running
  variance σ̂², truncated at (1/2)/μ_i(m) for K⁺ and (1/2)/(1 - μ_i(m)) for K⁻. K⁺ decreases
  and K⁻ increases in m, so C_t is an interval whose ends are roots (found by Brent's method,
  each end reported on its rejected side, so the interval is never narrower than the exact
  one). The tightest of the two forms, and the default.
- ``eb`` (predictable-mixture empirical Bernstein): exp(Σ λ_i (Y_i - μ_i(m)) - Σ v_i ψ(λ_i))
  with v_i = (Y_i - μ̂_{i-1})² and ψ(λ) = -log(1 - λ) - λ is a supermartingale; rejecting where
  it exceeds 2/α gives the interval in closed form (μ_i(m) is affine in m).

Both are intersected with the logical bounds (the unseen rows are all a, or all b) and with the
earlier looks (the running intersection keeps the guarantee). The guarantee assumes the order
in which rows are scored is a uniformly random permutation, which run_evals' seeded shard
shuffle provides; rows whose generation failed are left out, which keeps it only when failures
do not depend on the score.

A difference between two configs scored on the same rows is the mean of the per-row
differences, a population of N values in [a - b, b - a]: `paired_confidence_sequence` is the
same sequence on those differences.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from assay.errors import ConfigError
from assay.stats.value_range import check_range

AnytimeMethod = Literal["betting", "eb"]
METHODS: tuple[str, ...] = ("betting", "eb")
_CAP = 0.5
"""Truncation scale of the bets: every capital factor stays at least 1/2 and ψ(λ) finite."""
_TOLERANCE = 1e-10
"""Precision of each interval end, as a share of the value range."""


@dataclass(frozen=True, slots=True)
class ConfidenceSequence:
    """A confidence sequence read at a number of looks (each a prefix of the observations)."""

    rows: np.ndarray
    """Rows seen at each look."""
    estimate: np.ndarray
    """Mean of the rows seen at each look."""
    lower: np.ndarray
    upper: np.ndarray
    """Bounds on the population mean at each look, valid at all looks simultaneously."""
    confidence_level: float
    method: str

    def covers(self, value: float, tolerance: float = 1e-9) -> np.ndarray:
        """Whether each look's interval contains `value` (give or take float rounding)."""
        return (self.lower - tolerance <= value) & (value <= self.upper + tolerance)


def confidence_sequence(
    values: Sequence[float] | np.ndarray,
    *,
    population: int,
    value_range: Sequence[float] = (0.0, 1.0),
    confidence_level: float = 0.95,
    counts: Sequence[int] | np.ndarray | None = None,
    looks: Sequence[int] | np.ndarray | None = None,
    method: AnytimeMethod = "betting",
) -> ConfidenceSequence:
    """Confidence sequence for the mean of a finite population of `population` values.

    values: the observations in the (random) order they were drawn, each the mean of
    ``counts[i]`` rows (default one row each) drawn together. looks: how many observations had
    been seen at each look (default: one look after the last). The bounds hold at every look
    simultaneously with probability `confidence_level`.
    """
    low, high = check_range(value_range)
    alpha = _alpha(confidence_level)
    if method not in METHODS:
        raise ConfigError(f"anytime method {method!r} is not one of {list(METHODS)}")
    y = (np.asarray(values, dtype=float) - low) / (high - low)
    n = np.ones(len(y)) if counts is None else np.asarray(counts, dtype=float)
    if len(n) != len(y):
        raise ValueError(f"{len(y)} values but {len(n)} counts")
    if np.any(n < 1):
        raise ValueError("every observation must count at least one row")
    slack = 1e-9
    if len(y) and (np.min(y) < -slack or np.max(y) > 1 + slack):
        bad = float(np.asarray(values, dtype=float)[np.argmax((y < -slack) | (y > 1 + slack))])
        raise ConfigError(
            f"a value {bad!r} lies outside value_range {tuple(value_range)!r}; declare the "
            "metric's true range in value_range"
        )
    y = np.clip(y, 0.0, 1.0)
    rows = np.cumsum(n)
    if len(rows) and rows[-1] > population:
        raise ValueError(f"{int(rows[-1])} rows observed from a population of {population}")
    ends = np.array([len(y)] if looks is None else looks, dtype=int)
    if len(ends) and (np.any(ends < 1) or np.any(ends > len(y)) or np.any(np.diff(ends) < 0)):
        raise ValueError(f"looks must be increasing observation counts in 1..{len(y)}")
    lower = _lower_bounds(y, n, population, alpha, ends, method)
    upper = 1.0 - _lower_bounds(1.0 - y, n, population, alpha, ends, method)
    sums = np.cumsum(y * n)
    seen = rows[ends - 1]
    seen_sum = sums[ends - 1]
    # Logical bounds: the unseen rows are all 0, or all 1.
    lower = np.maximum(lower, seen_sum / population)
    upper = np.minimum(upper, (seen_sum + population - seen) / population)
    lower = np.maximum.accumulate(lower) if len(lower) else lower
    upper = np.minimum.accumulate(upper) if len(upper) else upper
    mean = seen_sum / seen
    census = seen >= population  # every row seen: the mean itself, without rounding slack
    lower, upper = np.where(census, mean, lower), np.where(census, mean, upper)
    width = high - low
    return ConfidenceSequence(
        rows=seen.astype(int),
        estimate=low + width * mean,
        lower=low + width * lower,
        upper=low + width * upper,
        confidence_level=confidence_level,
        method=f"anytime ({method}, without replacement)",
    )


def paired_confidence_sequence(
    scores_a: Sequence[float] | np.ndarray,
    scores_b: Sequence[float] | np.ndarray,
    *,
    population: int,
    value_range: Sequence[float] = (0.0, 1.0),
    confidence_level: float = 0.95,
    looks: Sequence[int] | np.ndarray | None = None,
    method: AnytimeMethod = "betting",
) -> ConfidenceSequence:
    """Confidence sequence for mean(a) - mean(b) over a population of rows both configs score.

    scores_a[i] and scores_b[i] are the two configs' scores of the same row, rows in the order
    drawn; each score lies in `value_range`, so each difference in [low - high, high - low].
    """
    a = np.asarray(scores_a, dtype=float)
    b = np.asarray(scores_b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired scores differ in length: {len(a)} vs {len(b)}")
    low, high = check_range(value_range)
    width = high - low
    return confidence_sequence(
        a - b,
        population=population,
        value_range=(-width, width),
        confidence_level=confidence_level,
        looks=looks,
        method=method,
    )


def _alpha(confidence_level: float) -> float:
    if not 0.0 < confidence_level < 1.0:
        raise ConfigError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    return 1.0 - confidence_level


def _bets(y: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Predictable bets λ_i (before truncation) and predictable mean estimates μ̂_{i-1}
    (regularised by a prior observation of mean 1/2 and variance 1/4, as in the paper)."""
    t = np.arange(1, len(y) + 1, dtype=float)
    mean = (0.5 + np.cumsum(y)) / (t + 1)
    variance = (0.25 + np.cumsum((y - mean) ** 2)) / (t + 1)
    previous_mean = np.concatenate(([0.5], mean[:-1]))
    previous_variance = np.concatenate(([0.25], variance[:-1]))
    bets = np.sqrt(2 * math.log(2 / alpha) / (previous_variance * t * np.log1p(t)))
    return bets, previous_mean


def _lower_bounds(
    y: np.ndarray, n: np.ndarray, population: int, alpha: float, ends: np.ndarray, method: str
) -> np.ndarray:
    """Lower end of the (one-sided, α/2) sequence at each look, in [0, 1] units.

    μ_i(m) = slope_i·m + offset_i: the mean of the rows not drawn before observation i.
    """
    rows_before = np.cumsum(n) - n
    sum_before = np.cumsum(y * n) - y * n
    remaining = population - rows_before
    slope = population / remaining
    offset = -sum_before / remaining
    bets, previous_mean = _bets(y, alpha)
    threshold = math.log(2 / alpha)
    if method == "eb":
        bets = np.minimum(bets, _CAP)
        psi = -np.log1p(-bets) - bets
        gain = np.cumsum(bets * (y - offset) - (y - previous_mean) ** 2 * psi)
        weight = np.cumsum(bets * slope)
        return np.asarray((gain[ends - 1] - threshold) / weight[ends - 1])
    return _betting_lower(y, slope, offset, bets, threshold, ends)


def _betting_lower(
    y: np.ndarray,
    slope: np.ndarray,
    offset: np.ndarray,
    bets: np.ndarray,
    threshold: float,
    ends: np.ndarray,
) -> np.ndarray:
    """Largest m whose capital log K⁺ reaches `threshold` at each look.

    The bet on observation i is λ_i ∧ (1/2)/μ_i(m), the paper's truncation, which keeps every
    factor 1 + λ(Y - μ) at least 1/2. Each factor then decreases in μ_i(m) (in either regime of
    the minimum), and μ_i(m) increases in m, so log K⁺ decreases in m: the rejected m form an
    interval [0, end], whose end is a root found by Brent's method and then moved down until it
    is rejected. Within the logical bounds every μ_i(m) lies in [0, 1]; outside them m is
    impossible and needs no test.
    """
    from scipy.optimize import brentq

    out = np.empty(len(ends))
    for look, end in enumerate(ends):
        args = (y[:end], slope[:end], offset[:end], bets[:end], threshold)
        smallest = float(np.max(-offset[:end] / slope[:end]))
        largest = float(np.min((1 - offset[:end]) / slope[:end]))
        if _excess(smallest, *args) < 0:  # nothing feasible is rejected
            out[look] = smallest
        elif _excess(largest, *args) >= 0:  # everything feasible is rejected
            out[look] = largest
        else:
            root = brentq(_excess, smallest, largest, args=args, xtol=_TOLERANCE)
            # Report a rejected m (at or below the exact end): never too narrow.
            step = _TOLERANCE
            while root > smallest and _excess(root, *args) < 0:
                root = max(smallest, root - step)
                step *= 2
            out[look] = root
    return out


def _excess(
    m: float,
    y: np.ndarray,
    slope: np.ndarray,
    offset: np.ndarray,
    bets: np.ndarray,
    threshold: float,
) -> float:
    """log K⁺(m) - threshold over the observations given."""
    mu = np.clip(slope * m + offset, 0.0, 1.0)
    bet = np.minimum(bets, np.divide(_CAP, mu, out=np.full_like(mu, np.inf), where=mu > 0))
    return float(np.log1p(bet * (y - mu)).sum()) - threshold
