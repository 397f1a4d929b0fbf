"""Paired 0/1 scores: McNemar's exact test, the exact interval that inverts it, and the range
[-1, 1] every 0/1 difference (and so its interval and MDE) lies in."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from assay.stats.exact import paired_binary_exact
from assay.stats.paired_result import MDE_NOTE, METHOD_EXACT, TEST_MCNEMAR, PairedResult


def mcnemar_exact(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    """McNemar's exact test: the two-sided binomial test (p = 1/2) on the discordant pairs,
    min(1, 2·P(X ≤ min(n01, n10))) with X ~ Bin(n01 + n10, 1/2); 1.0 without discordant pairs.
    None unless every value of both runs is 0 or 1."""
    if not is_binary(a) or not is_binary(b):
        return None
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        only_a, only_b = int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum())
    else:
        only_a = sum(1 for x, y in zip(a, b) if x == 1 and y == 0)
        only_b = sum(1 for x, y in zip(a, b) if x == 0 and y == 1)
    discordant = only_a + only_b
    if discordant == 0:
        return 1.0
    # scipy's binomial CDF (a regularised incomplete beta), not a sum of exact binomial
    # coefficients: that sum grows with the square of the discordant count (minutes at 100k docs).
    from scipy.stats import binom

    return float(min(1.0, 2 * binom.cdf(min(only_a, only_b), discordant, 0.5)))


def is_binary(values: Sequence[Any]) -> bool:
    if isinstance(values, np.ndarray):  # numbers already: one pass in numpy
        return bool(values.size and values.dtype.kind in "biuf" and np.isin(values, (0, 1)).all())
    # bool is an int: True and False count as 1 and 0.
    return bool(values) and all(isinstance(v, int | float) and v in (0, 1) for v in values)


def exact_binary(
    mean_a: float, mean_b: float, d: np.ndarray, confidence: float, mcnemar_p: float | None
) -> PairedResult:
    """0/1 values: the exact interval and McNemar's exact test (stats.exact), whatever the
    number of differing docs, so that the row's `*`, p-value, interval and McNemar column
    agree; the MDE is the exact power's (stats.binary_power)."""
    from assay.stats.binary_power import exact_mde

    n = len(d)
    exact = paired_binary_exact(int((d < 0).sum()), int((d > 0).sum()), n, confidence)
    stderr = float(d.std(ddof=1) / math.sqrt(n))
    diff = mean_b - mean_a
    return PairedResult(
        n=n,
        mean_a=mean_a,
        mean_b=mean_b,
        diff=diff,
        stderr=stderr,
        ci_low=min(exact.low, diff),
        ci_high=max(exact.high, diff),
        confidence=confidence,
        p_value=exact.p_value,
        mcnemar_p=mcnemar_p,
        mde=exact_mde(n, float(d.var(ddof=1)), confidence),
        clusters=None,
        method=METHOD_EXACT,
        test=TEST_MCNEMAR,
    )


def clipped(result: PairedResult) -> PairedResult:
    """A difference of 0/1 scores lies in [-1, 1]: an interval reaching past it is cut there,
    and the note says so."""
    if not (result.ci_low < -1 or result.ci_high > 1):
        return result
    why = (
        f"the interval [{result.ci_low:+.4g}, {result.ci_high:+.4g}] reached past the possible "
        "differences of 0/1 scores, [-1, +1], and is cut there"
    )
    return replace(
        result,
        ci_low=max(-1.0, result.ci_low),
        ci_high=min(1.0, result.ci_high),
        note=why if result.note is None else f"{result.note}; {why}",
    )


def within_range(result: PairedResult, binary: bool) -> PairedResult:
    """A 0/1 difference never exceeds 1: an MDE beyond it (or one the exact power never
    reaches) detects nothing, so it is NaN, with the reason."""
    spread = result.stderr if result.stderr_bound is None else result.stderr_bound
    unreached = math.isnan(result.mde) and spread > 0
    if not binary or not (result.mde > 1 or unreached):
        return result
    shown = f"{result.mde:.3g} exceeds 1" if result.mde > 1 else "none below 1"
    why = (
        f"{MDE_NOTE}{shown}, the largest difference of 0/1 scores: no difference is detected "
        "with 80 % power from these docs"
    )
    return replace(
        result, mde=math.nan, note=why if result.note is None else f"{result.note}; {why}"
    )
