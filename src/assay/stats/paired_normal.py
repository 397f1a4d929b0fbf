"""The normal (or Student's t) interval, p-value and MDE of a paired difference with a standard
error, the marks put on it where it covers less than it claims, the results of values that
are not finite numbers, and groups of tasks combined without weights."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from assay.stats.normal import two_sided_p, two_sided_z
from assay.stats.paired_result import (
    EXACT_BOUND,
    METHOD_EXACT,
    METHOD_PAIRED,
    TEST_CLUSTERED,
    TEST_NORMAL,
    PairedResult,
    unestimated,
)
from assay.stats.power import mde
from assay.stats.thresholds import SKEWED, SKEWED_COCHRAN, SKEWED_DIFFERING


def normal_result(
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
    note: str | None = None,
    df: float | None = None,
) -> PairedResult:
    """The normal-approximation statistics of a difference with this standard error; with
    `df`, Student's t with df degrees of freedom in place of the normal (CR2 clusters)."""
    diff = mean_b - mean_a
    z = two_sided_z(confidence) if df is None else _t_quantile(confidence, df)
    return PairedResult(
        n=n,
        mean_a=mean_a,
        mean_b=mean_b,
        diff=diff,
        stderr=stderr,
        ci_low=diff - z * stderr,
        ci_high=diff + z * stderr,
        confidence=confidence,
        p_value=_normal_p(no_difference, diff, stderr, df),
        mcnemar_p=mcnemar_p,
        mde=mde(stderr, confidence, df=df),
        clusters=clusters,
        method=method,
        note=note,
        test=TEST_NORMAL if df is None else TEST_CLUSTERED,
    )


def _normal_p(no_difference: bool, diff: float, stderr: float, df: float | None = None) -> float:
    if no_difference:
        return 1.0
    if math.isnan(stderr) or stderr <= 0:
        return math.nan  # no spread is no evidence of certainty
    if df is None:
        return two_sided_p(diff / stderr)
    from scipy.stats import t

    return float(2 * t.sf(abs(diff / stderr), df))


def _t_quantile(confidence: float, df: float) -> float:
    from scipy.stats import t

    return float(t.ppf(1 - (1 - confidence) / 2, df))


def combine_unweighted(parts: Sequence[PairedResult], confidence: float = 0.95) -> PairedResult:
    """A group that averages its tasks without weights: diff = the mean of the tasks' diffs,
    stderr = sqrt(Σ stderr_t²)/k (independent tasks), the normal interval and p-value on
    those; method "<the tasks' method>-unweighted". A task whose stderr cannot be estimated
    enters with its `stderr_bound`; the group's stderr is then NaN, its interval, p-value and
    MDE come from the bound and the note says so (NaN where a task has no bound either)."""
    if not parts:
        raise ValueError("no task comparisons to combine")
    k = len(parts)
    spreads = [p.stderr if p.stderr_bound is None else p.stderr_bound for p in parts]
    stderr = math.sqrt(sum(s**2 for s in spreads)) / k
    counts = [p.clusters for p in parts]
    result = normal_result(
        sum(p.n for p in parts),
        sum(p.mean_a for p in parts) / k,
        sum(p.mean_b for p in parts) / k,
        stderr,
        confidence,
        no_difference=all(p.p_value == 1.0 and p.diff == 0 and not p.stderr > 0 for p in parts),
        mcnemar_p=None,
        clusters=None if any(c is None for c in counts) else sum(c or 0 for c in counts),
        method=f"{_normal_method(parts[0].method)}-unweighted",
    )
    unestimated = sum(1 for p in parts if math.isnan(p.stderr))
    if not unestimated:
        return result
    if math.isnan(stderr):
        return replace(
            result,
            note=f"{unestimated} of the {k} tasks have no stderr and no bound: the group's "
            "stderr, interval and MDE cannot be estimated",
        )
    return replace(
        result,
        stderr=math.nan,
        stderr_bound=stderr,
        note=f"{unestimated} of the {k} tasks have no estimable stderr (no spread): their "
        "exact upper bounds stand in, so the group's interval, p-value and MDE are "
        "conservative and its stderr is not estimated",
    )


def _normal_method(method: str) -> str:
    """The method a group's normal interval reads as, from one of its tasks' methods."""
    method = method.removesuffix(EXACT_BOUND)
    return METHOD_PAIRED if method == METHOD_EXACT else method


def mark_skewed(
    result: PairedResult, d: np.ndarray, differing: np.ndarray, unit: str = "docs"
) -> PairedResult:
    """Skewed differences mark the normal interval, with the reason, where it covers less than
    it claims: skewness beyond `SKEWED` with fewer than `SKEWED_DIFFERING` differing `unit`
    (0.83-0.89 there); at any size, no more values than Cochran's rule `SKEWED_COCHRAN` · g1²
    asks for (g1 the sample skewness: lognormal differences with sigma 1.5 covered 0.84-0.88
    at 100-200 docs); or no more differing values (`differing`, the differences beyond
    rounding) than the rule asks for at the skewness their bulk implies (`bulk_skewness`):
    lognormal samples whose own skewness missed the tail escaped the first rule and covered
    0.75-0.82 (benchmarks/coverage_atlas.py)."""
    skewness = sample_skewness(d)
    count = len(differing)
    why: str | None
    if abs(skewness) > SKEWED and count < SKEWED_DIFFERING:
        why = f"only {count} of the {len(d)} {unit} differ (fewer than {SKEWED_DIFFERING})"
    else:
        why = cochran_shortfall(d, differing, unit)
    if why is None:
        return result
    return replace(
        result,
        note=f"the per-{unit.rstrip('s')} differences are skewed (sample skewness "
        f"{skewness:+.2f}) and {why}: the normal interval covers less than it claims there "
        "(0.75-0.89 in benchmarks/coverage_atlas.py), so the interval, p-value and MDE are "
        "optimistic",
    )


def cochran_shortfall(values: np.ndarray, differing: np.ndarray, unit: str) -> str | None:
    """Why `values` are too few for the normal interval of their mean by Cochran's rule (no more
    than `SKEWED_COCHRAN` · g1², g1 the sample skewness; or, where the sample looks skewed
    beyond `SKEWED`, no more `differing` values than the rule asks for at the skewness their
    bulk implies, `bulk_skewness`), or None where they are enough. It reads the sample alone,
    never the estimate's distance from any value, so it marks the same samples whatever the
    truth: compare's paired differences and run_evals' live per-row scores share it."""
    skewness = sample_skewness(values)
    needed = SKEWED_COCHRAN * skewness**2
    bulk = bulk_skewness(differing) if abs(skewness) > SKEWED else 0.0
    count = len(differing)
    if len(values) <= needed:
        return (
            f"{len(values)} {unit} are no more than the {needed:.0f} Cochran's rule "
            f"({SKEWED_COCHRAN} x skewness squared) asks for"
        )
    if bulk * skewness > 0 and count <= SKEWED_COCHRAN * bulk**2:
        return (
            f"the 10th, 50th and 90th percentiles of the {count} differing {unit} are as "
            f"lopsided as a lognormal's of skewness {abs(bulk):.1f}, whose tail so few values "
            f"may have missed (Cochran's rule asks for more than {SKEWED_COCHRAN * bulk**2:.0f})"
        )
    return None


def sample_skewness(d: np.ndarray) -> float:
    """The sample skewness g1 (0 where the values have no spread)."""
    centred = d - d.mean()
    spread = float(np.mean(centred**2))
    return float(np.mean(centred**3)) / spread**1.5 if spread > 0 else 0.0


def bulk_skewness(values: np.ndarray) -> float:
    """The skewness (signed) of the lognormal whose 10th, 50th and 90th percentiles are as
    lopsided as these values' (Kelly's quantile skewness k = (P90 + P10 - 2·P50)/(P90 - P10),
    which is tanh(1.2816·sigma/2) for a lognormal of shape sigma): a sample of a heavy-tailed
    population that missed its tail has a small moment skewness but a lopsided bulk. 0 where
    the 10th and 90th percentiles coincide."""
    if len(values) < 2:
        return 0.0
    low, middle, high = np.quantile(values, [0.1, 0.5, 0.9])
    if high <= low:
        return 0.0
    kelly = float((high + low - 2 * middle) / (high - low))
    # |k| = 1 (the 10th and 50th percentiles coincide) matches no finite sigma; 0.999
    # (sigma 5.9) stands for it.
    sigma = math.atanh(min(abs(kelly), 0.999)) / (1.2815516 / 2)
    w = math.exp(sigma**2)
    return math.copysign((w + 2) * math.sqrt(w - 1), kelly)


def not_finite(
    n: int,
    x: np.ndarray,
    y: np.ndarray,
    docs: int,
    confidence: float,
    clusters: int | None,
    method: str,
) -> PairedResult:
    """Some per-doc value is inf or NaN: no statistic of the difference is a number."""
    kinds = sorted({str(v) for v in np.concatenate([x, y]) if not math.isfinite(v)})
    return unestimated(
        n,
        float(x.mean()),
        float(y.mean()),
        math.nan,
        confidence,
        clusters=clusters,
        method=method,
        note=f"{docs} of the {n} docs hold a value that is not a finite number "
        f"({', '.join(kinds)}) in one run or both: no difference, stderr, interval, p-value "
        "or MDE; a mean that is not finite is shown as null",
    )


def overflowed(scaled: PairedResult, scale: float) -> PairedResult:
    """The comparison of values whose differences or squares overflow floating point, from
    `scaled`, the comparison of the values divided by `scale`: its means, difference,
    stderr, interval and MDE multiplied back (the p-value has no scale). A statistic that
    exceeds the largest floating-point number even so is NaN, and the note names it."""
    fields = ("mean_a", "mean_b", "diff", "stderr", "ci_low", "ci_high", "mde")
    with np.errstate(over="ignore"):
        values = {f: float(np.float64(getattr(scaled, f)) * scale) for f in fields}
        bound = (
            None if scaled.stderr_bound is None else float(np.float64(scaled.stderr_bound) * scale)
        )
    too_large = [f for f, v in values.items() if math.isinf(v)]
    shown = {f: math.nan if f in too_large else v for f, v in values.items()}
    result = replace(
        scaled,
        mean_a=shown["mean_a"],
        mean_b=shown["mean_b"],
        diff=shown["diff"],
        stderr=shown["stderr"],
        ci_low=shown["ci_low"],
        ci_high=shown["ci_high"],
        mde=shown["mde"],
        stderr_bound=bound,
    )
    if not too_large:
        return result
    names = ", ".join(_NAMES[f] for f in too_large)
    verb = "exceeds" if len(too_large) == 1 else "exceed"
    why = (
        f"the {names} {verb} the largest floating-point number (about 1.8e308): not shown "
        "(rescale the metric)"
    )
    return replace(result, note=why if result.note is None else f"{result.note}; {why}")


_NAMES = {
    "mean_a": "mean of a",
    "mean_b": "mean of b",
    "diff": "difference",
    "stderr": "stderr",
    "ci_low": "interval's lower end",
    "ci_high": "interval's upper end",
    "mde": "MDE",
}


def no_stderr_reason(n: int, clusters: int | None) -> str:
    """Why a sample with spread still has no standard error."""
    if n == 0:
        return "no docs paired: nothing to estimate"
    if clusters is not None and clusters < 2:
        return (
            f"all {n} docs are in one cluster: a clustered variance needs two clusters or "
            "more, so there is no stderr, interval or MDE"
        )
    return "a per-doc difference is not a finite number: no stderr, interval or MDE"
