"""Paired differences without spread (one doc, or every difference the same up to rounding):
their variance is not an estimate of the population's, so no stderr is claimed; for 0/1
values the exact bound of `stats.exact` stands in for the interval and MDE."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from assay.stats.exact import constant_sample_bound
from assay.stats.paired_result import (
    EXACT_BOUND,
    TEST_NONE,
    TEST_SIGN,
    PairedResult,
    unestimated,
)


def no_spread(d: np.ndarray, x: np.ndarray, y: np.ndarray) -> bool:
    """Whether the differences are all the same, up to the rounding of the subtraction
    (0.5 - 0.2 and 0.7 - 0.4 differ in the last bit: that is not a spread). The values must
    be finite."""
    if not len(d):
        return False
    return float(np.ptp(d)) <= rounding_tolerance(x, y)


def rounding_tolerance(x: np.ndarray, y: np.ndarray) -> float:
    """The size below which a per-doc difference of these values is rounding, not a
    difference: 1e-12 of the largest magnitude, relative at every scale (an absolute floor
    read values near 1e-13 that differ threefold as equal)."""
    if not len(x):
        return 0.0
    return 1e-12 * max(float(np.abs(x).max()), float(np.abs(y).max()))


def describe_constant(d: np.ndarray, tolerance: float) -> tuple[str, float]:
    """What a sample of differences without spread shows, quoted truthfully, and the value it
    stands for: "all 5 per-doc differences are 0.2", "... equal 0.2 up to rounding",
    "... are all within rounding of 0 (|d| <= 1e-12)" (value 0), "one doc (difference 0.2)"."""
    n = len(d)
    centre = float(np.median(d))
    if float(np.abs(d).max()) <= tolerance:
        if n == 1:
            return f"one doc (difference within rounding of 0, |d| <= {tolerance:.0e})", 0.0
        if not np.any(d):
            return f"all {n} per-doc differences are 0", 0.0
        return f"all {n} per-doc differences are within rounding of 0 (|d| <= {tolerance:.0e})", 0.0
    if n == 1:
        return f"one doc (difference {centre:g})", centre
    if not np.ptp(d):
        return f"all {n} per-doc differences are {centre:g}", centre
    return f"all {n} per-doc differences equal {centre:g} up to rounding", centre


def constant_difference(
    n: int,
    mean_a: float,
    mean_b: float,
    d: np.ndarray,
    tolerance: float,
    confidence: float,
    *,
    binary: bool,
    mcnemar_p: float | None,
    clusters: int | None,
    method: str,
) -> PairedResult:
    """Every per-doc difference is the same up to rounding (n >= 1): the sample shows no
    spread, so its variance is not an estimate of the population's (see the module
    docstring)."""
    units = n if clusters is None else clusters
    what = "docs" if clusters is None else "clusters"
    seen, value = describe_constant(d, tolerance)
    if value == 0:
        p_value, test = 1.0, TEST_NONE
    elif binary:
        p_value, test = min(1.0, 2 * 0.5**units), TEST_SIGN  # McNemar's with no tie
    else:
        p_value, test = math.nan, TEST_NONE
    diff = mean_b - mean_a
    missing = unestimated(
        n,
        mean_a,
        mean_b,
        diff,
        confidence,
        p_value=p_value,
        test=test,
        mcnemar_p=mcnemar_p,
        clusters=clusters,
        method=method,
        note=f"{seen}: with no spread their variance cannot be estimated, and the values are "
        "not 0/1, so no bound stands in: no stderr, interval or MDE"
        + ("" if value == 0 else "; no p-value"),
    )
    if not binary:
        return missing
    from assay.stats.binary_power import exact_mde

    # A difference other than 0 is tested two-sided (the sign test), so its bound is built at
    # α/2 on the side facing 0: the interval then holds 0 exactly when p >= α (2·0.5^n >= α).
    level = confidence if value == 0 else 1 - (1 - confidence) / 2
    bound = constant_sample_bound(value, units, level)
    stderr_bound = math.sqrt(bound.variance / units)
    test = "" if value == 0 else f"; p-value: exact sign test over the {units} {what}"
    smallest = exact_mde(units, bound.variance, confidence)
    # Where the bound gives no MDE within 1, `within_range` says so: one statement, not two.
    basis = f"; variance bound {bound.variance:.4g}" + (
        ", the MDE's basis" if smallest <= 1 else ""
    )
    return replace(
        missing,
        ci_low=min(bound.low, diff),
        ci_high=max(bound.high, diff),
        mde=smallest,
        method=method + EXACT_BOUND,
        stderr_bound=stderr_bound,
        note=f"{seen}: with no spread their variance cannot be estimated (no stderr). "
        f"Interval: exact bound from the Clopper-Pearson {level * 100:g}% upper bound on the "
        f"share of {what} whose difference is not {value:g} ({bound.other_share:.4g} of "
        f"{units}, rule of three ≈ 3/n){basis}{test}",
    )
