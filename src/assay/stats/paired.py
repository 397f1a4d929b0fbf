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
import warnings
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from assay.stats.clustered import cluster_count, cluster_degrees_of_freedom, cr2_variance_of_mean
from assay.stats.exact import constant_sample_bound, paired_binary_exact
from assay.stats.normal import check_confidence, two_sided_p, two_sided_z
from assay.stats.power import mde
from assay.stats.thresholds import (
    SKEWED,
    SKEWED_DIFFERING,
    SMALL_NORMAL,
    SPARSE_DISCORDANT,
)

METHOD_PAIRED = "paired"
METHOD_CLUSTERED = "paired-clustered"
METHOD_BOOTSTRAP = "paired-bootstrap"
METHOD_CLUSTER_BOOTSTRAP = "paired-cluster-bootstrap"
METHOD_EXACT = "paired-exact"
EXACT_BOUND = "-exact-bound"
"""Suffix of the method of a comparison whose interval is the exact bound of `stats.exact`."""


@dataclass(frozen=True)
class PairedResult:
    """One paired comparison of run b against run a. NaN where a statistic cannot be
    estimated from the docs, with the reason in `note`."""

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
    """paired, paired-clustered, paired-bootstrap or paired-cluster-bootstrap; with the suffix
    -exact-bound when the interval is the exact bound of a sample without spread."""
    note: str | None = None
    """Why a statistic is NaN, or which conservative substitute stands in for it; None when
    every statistic was estimated."""
    stderr_bound: float | None = None
    """Where `stderr` cannot be estimated but bounded: the upper bound the MDE was computed
    from (a group that combines tasks uses it in place of the missing stderr)."""
    test: str = "normal"
    """The test `p_value` comes from (and so the row's `*`): normal, t(Bell-McCaffrey) CR2,
    McNemar exact, sign-flip exact, exact sign test, bootstrap, or none."""


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
    method = METHOD_PAIRED if clusters is None else METHOD_CLUSTERED
    count = None if clusters is None else cluster_count(clusters)
    unfinite = int((~(np.isfinite(x) & np.isfinite(y))).sum())
    if unfinite:
        return _not_finite(n, x, y, unfinite, confidence, count, method)
    with np.errstate(over="ignore", invalid="ignore"):
        d = y - x
        mean_a, mean_b = (float(x.mean()), float(y.mean())) if n else (math.nan, math.nan)
        spread = float(np.square(d - d.mean()).sum()) if n else 0.0
    if n and not (
        np.isfinite(d).all() and math.isfinite(mean_a + mean_b) and math.isfinite(spread)
    ):
        return _overflowed(n, (mean_a, mean_b), x, y, confidence, count, method)
    # McNemar's test assumes independent docs: a clustered row is read against CR2's t alone.
    mcnemar_p = mcnemar_exact(a, b) if clusters is None else None
    binary = _binary(a) and _binary(b)
    if n and no_spread(d, x, y):
        result = _constant_difference(
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
        return _within_range(result, binary)
    if clusters is None and binary:
        return _within_range(_exact_binary(mean_a, mean_b, d, confidence, mcnemar_p), True)
    differing = d[np.abs(d) > rounding_tolerance(x, y)]
    if clusters is None and len(differing) < SPARSE_DISCORDANT:
        return _sparse_differences(n, mean_a, mean_b, d, differing, confidence)
    df = None
    note = None
    if clusters is not None:
        stderr = math.sqrt(cr2_variance_of_mean(d, clusters))
        df = None if count is None or count < 2 else cluster_degrees_of_freedom(clusters)
        if stderr <= rounding_tolerance(x, y):
            # Every cluster has the same mean difference (up to rounding): no spread between
            # the independent units, so no clustered variance (0 would claim it is known).
            stderr = math.nan
            note = (
                f"all {count} clusters have the same mean difference (up to rounding): with no "
                "spread between "
                "clusters the clustered variance cannot be estimated, so there is no stderr, "
                "interval or MDE"
            )
    else:
        stderr = float(d.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    if math.isnan(stderr) and note is None:
        note = _no_stderr_reason(n, count)
    result = _normal_result(
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
        result = _few_docs_outside_one_cluster(result, clusters)
    if clusters is None and result.note is None and n < SMALL_NORMAL:
        result = replace(
            result,
            note=f"{n} docs: below {SMALL_NORMAL} the normal interval on values that are not "
            "0/1 covers less than it claims (87 % at 5 docs, benchmarks/coverage_atlas.py): "
            "the interval, p-value and MDE are optimistic",
        )
    if clusters is None and result.note is None and len(differing) < SKEWED_DIFFERING:
        result = _skewed(result, d, len(differing))
    if binary:
        result = _clipped(result)
    return _within_range(result, binary)


def _skewed(result: PairedResult, d: np.ndarray, differing: int) -> PairedResult:
    """Differences skewed beyond `SKEWED` with fewer than `SKEWED_DIFFERING` differing docs:
    the normal interval covers less than it claims, so it is marked, with the reason."""
    centred = d - d.mean()
    spread = float(np.mean(centred**2))
    skewness = float(np.mean(centred**3)) / spread**1.5 if spread > 0 else 0.0
    if not abs(skewness) > SKEWED:
        return result
    return replace(
        result,
        note=f"the per-doc differences are skewed (sample skewness {skewness:+.2f}) and only "
        f"{differing} of the {result.n} docs differ (fewer than {SKEWED_DIFFERING}): the normal "
        "interval covers less than it claims there (0.83-0.89 in benchmarks/coverage_atlas.py), "
        "so the interval, p-value and MDE are optimistic",
    )


SIGN_FLIP_DRAWS = 1 << 16
"""Seeded random sign flips of the sign-flip test above `SIGN_FLIP_ENUMERATED` differing docs."""

SIGN_FLIP_ENUMERATED = 16
"""Differing docs up to which the sign-flip test enumerates all 2^D sign patterns."""


def _exact_binary(
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


TEST_NORMAL = "normal"
TEST_CLUSTERED = "t(Bell-McCaffrey) CR2"
TEST_MCNEMAR = "McNemar exact"
TEST_SIGN_FLIP = "sign-flip exact"
TEST_SIGN = "exact sign test"
TEST_BOOTSTRAP = "bootstrap"
TEST_NONE = "none"


def _sparse_differences(
    n: int,
    mean_a: float,
    mean_b: float,
    d: np.ndarray,
    differing: np.ndarray,
    confidence: float,
) -> PairedResult:
    """Values that are not 0/1, of which fewer than `SPARSE_DISCORDANT` docs differ: the
    normal interval and test lean on those few docs and under-cover, so the p-value (and `*`)
    is the exact sign-flip test over the differing docs, and no interval or MDE is claimed."""
    p_value = sign_flip_p(differing)
    count = len(differing)
    how = "all 2^D sign patterns" if count <= SIGN_FLIP_ENUMERATED else f"{SIGN_FLIP_DRAWS} draws"
    return PairedResult(
        n=n,
        mean_a=mean_a,
        mean_b=mean_b,
        diff=mean_b - mean_a,
        stderr=float(d.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan,
        ci_low=math.nan,
        ci_high=math.nan,
        confidence=confidence,
        p_value=p_value,
        mcnemar_p=None,
        mde=math.nan,
        clusters=None,
        method=METHOD_PAIRED,
        test=TEST_SIGN_FLIP,
        note=f"only {count} of the {n} docs differ (fewer than {SPARSE_DISCORDANT}): the "
        "normal interval and MDE lean on those few docs and cover less than they claim "
        "(benchmarks/coverage_atlas.py), so none is shown; p-value: exact sign-flip test "
        f"over the {count} differing docs ({how})",
    )


def sign_flip_p(differences: np.ndarray, seed: int = 1234) -> float:
    """Two-sided p-value of the sign-flip (paired permutation) test that the differences are
    symmetric about 0: the share of sign patterns whose |sum| reaches the observed one. Exact
    up to `SIGN_FLIP_ENUMERATED` values, else from `SIGN_FLIP_DRAWS` seeded draws with the
    observed pattern counted ((hits + 1)/(draws + 1), never below the exact p on average).
    On ±1 values it is McNemar's exact test. 1.0 without values."""
    values = np.abs(np.asarray(differences, dtype=np.float64))
    count = len(values)
    if count == 0:
        return 1.0
    observed = abs(float(np.asarray(differences, dtype=np.float64).sum()))
    # Sums equal up to rounding count as reaching the observed one (ties favour no rejection).
    slack = 1e-9 * float(values.sum())
    if count <= SIGN_FLIP_ENUMERATED:
        patterns = (np.arange(1 << count)[:, None] >> np.arange(count)) & 1
        sums = np.abs((1 - 2 * patterns) @ values)
        return float(np.mean(sums >= observed - slack))
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(SIGN_FLIP_DRAWS, count))
    hits = int((np.abs(signs @ values) >= observed - slack).sum())
    return (hits + 1) / (SIGN_FLIP_DRAWS + 1)


def _clipped(result: PairedResult) -> PairedResult:
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


def _not_finite(
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
    return PairedResult(
        n=n,
        mean_a=float(x.mean()),
        mean_b=float(y.mean()),
        diff=math.nan,
        stderr=math.nan,
        ci_low=math.nan,
        ci_high=math.nan,
        confidence=confidence,
        p_value=math.nan,
        mcnemar_p=None,
        mde=math.nan,
        clusters=clusters,
        method=method,
        test=TEST_NONE,
        note=f"{docs} of the {n} docs hold a value that is not a finite number "
        f"({', '.join(kinds)}) in one run or both: no difference, stderr, interval, p-value "
        "or MDE; a mean that is not finite is shown as null",
    )


MAX_CLUSTER_SHARE = 0.93
"""Share of the docs above which one cluster makes the clustered interval unreliable."""


def _few_docs_outside_one_cluster(
    result: PairedResult, clusters: Sequence[Hashable]
) -> PairedResult:
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


def _overflowed(
    n: int,
    means: tuple[float, float],
    x: np.ndarray,
    y: np.ndarray,
    confidence: float,
    clusters: int | None,
    method: str,
) -> PairedResult:
    """Finite values too large for floating point: their difference, mean or variance
    overflows, so no statistic of the difference is a number."""
    largest = float(np.abs(np.concatenate([x, y])).max())
    mean_a, mean_b = (m if math.isfinite(m) else math.nan for m in means)
    return PairedResult(
        n=n,
        mean_a=mean_a,
        mean_b=mean_b,
        diff=math.nan,
        stderr=math.nan,
        ci_low=math.nan,
        ci_high=math.nan,
        confidence=confidence,
        p_value=math.nan,
        mcnemar_p=None,
        mde=math.nan,
        clusters=clusters,
        method=method,
        test=TEST_NONE,
        note=f"values up to {largest:.3g} in magnitude are too large for floating point: "
        "their means, difference or variance overflow, so there is no difference, stderr, "
        "interval, p-value or MDE (rescale the metric)",
    )


def _within_range(result: PairedResult, binary: bool) -> PairedResult:
    """A 0/1 difference never exceeds 1: an MDE beyond it (or one the exact power never
    reaches) detects nothing, so it is NaN, with the reason."""
    spread = result.stderr if result.stderr_bound is None else result.stderr_bound
    unreached = math.isnan(result.mde) and spread > 0
    if not binary or not (result.mde > 1 or unreached):
        return result
    shown = f"{result.mde:.3g} exceeds 1" if result.mde > 1 else "none below 1"
    why = (
        f"MDE: {shown}, the largest difference of 0/1 scores: no difference is detected with "
        "80 % power from these docs"
    )
    return replace(
        result, mde=math.nan, note=why if result.note is None else f"{result.note}; {why}"
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
    difference: 1e-12 of the largest magnitude (at least 1e-12)."""
    if not len(x):
        return 1e-12
    return 1e-12 * max(1.0, float(np.abs(x).max()), float(np.abs(y).max()))


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


def _no_stderr_reason(n: int, clusters: int | None) -> str:
    """Why a sample with spread still has no standard error."""
    if n == 0:
        return "no docs paired: nothing to estimate"
    if clusters is not None and clusters < 2:
        return (
            f"all {n} docs are in one cluster: a clustered variance needs two clusters or "
            "more, so there is no stderr, interval or MDE"
        )
    return "a per-doc difference is not a finite number: no stderr, interval or MDE"


def _constant_difference(
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
    missing = PairedResult(
        n=n,
        mean_a=mean_a,
        mean_b=mean_b,
        diff=diff,
        stderr=math.nan,
        ci_low=math.nan,
        ci_high=math.nan,
        confidence=confidence,
        p_value=p_value,
        mcnemar_p=mcnemar_p,
        mde=math.nan,
        clusters=clusters,
        method=method,
        test=test,
        note=f"{seen}: with no spread their variance cannot be estimated, and the values are "
        "not 0/1, so no bound stands in: no stderr, interval or MDE"
        + ("" if value == 0 else "; no p-value"),
    )
    if not binary:
        return missing
    from assay.stats.binary_power import exact_mde

    bound = constant_sample_bound(value, units, confidence)
    stderr_bound = math.sqrt(bound.variance / units)
    test = "" if value == 0 else f"; p-value: exact sign test over the {units} {what}"
    smallest = exact_mde(units, bound.variance, confidence)
    # Where the bound gives no MDE within 1, `_within_range` says so: one statement, not two.
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
        f"Interval: exact bound from the Clopper-Pearson {confidence:.0%} upper bound on the "
        f"share of {what} whose difference is not {value:g} ({bound.other_share:.4g} of "
        f"{units}, rule of three ≈ 3/n){basis}{test}",
    )


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
    result = _normal_result(
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


def mcnemar_exact(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    """McNemar's exact test: the two-sided binomial test (p = 1/2) on the discordant pairs,
    min(1, 2·P(X ≤ min(n01, n10))) with X ~ Bin(n01 + n10, 1/2); 1.0 without discordant pairs.
    None unless every value of both runs is 0 or 1."""
    if not _binary(a) or not _binary(b):
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


def _binary(values: Sequence[Any]) -> bool:
    if isinstance(values, np.ndarray):  # numbers already: one pass in numpy
        return bool(values.size and values.dtype.kind in "biuf" and np.isin(values, (0, 1)).all())
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
    the interval is the percentile interval of diff* (widened to reach diff where every
    percentile lies on one side of it); the p-value is the two-sided
    min(1, 2·(min(#{diff* ≤ 0}, #{diff* ≥ 0}) + 1)/(iters + 1)), never 0. With fewer than two
    docs or clusters, or resamples that all give the same difference, the spread cannot be
    estimated: stderr, interval and MDE are NaN (p-value 1.0 for identical runs, else NaN)
    and `note` says why.
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
    with warnings.catch_warnings(record=True) as raised:
        # An aggregation's library (sklearn's f1 on a resample without positives) may warn on
        # many resamples: the warnings are summarised once in the note, not printed each time.
        warnings.simplefilter("always")
        for r in range(iters):
            drawn = rng.integers(0, units, units)
            rows = np.concatenate([members[u] for u in drawn]) if units else np.asarray([], int)
            replicates[r] = float(aggregate(_take(b, rows))) - float(aggregate(_take(a, rows)))
        mean_a = float(aggregate(a)) if n else math.nan
        mean_b = float(aggregate(b)) if n else math.nan
    notes = []
    if n < 2 or units < 2:
        stderr = low = high = p_value = math.nan
        where = f"{n} doc(s)" if clusters is None else f"{n} doc(s) in {units} cluster(s)"
        notes.append(
            f"{where}: a bootstrap needs two or more to estimate a spread, so there is no "
            "stderr, interval, p-value or MDE"
        )
    elif not np.isfinite(replicates).all():
        stderr = low = high = p_value = math.nan
        bad = int((~np.isfinite(replicates)).sum())
        notes.append(
            f"{bad} of the {iters} bootstrap resamples give a difference that is not a finite "
            "number: no stderr, interval, p-value or MDE"
        )
    elif not np.ptp(replicates):
        stderr = low = high = math.nan
        p_value = 1.0 if diff == 0 and replicates[0] == 0 else math.nan
        notes.append(
            f"all {iters} bootstrap resamples give the same difference ({replicates[0]:g}): the "
            "spread cannot be estimated from these docs, so there is no stderr, interval or MDE"
            + ("" if p_value == 1.0 else ", nor a p-value")
        )
    else:
        stderr = float(replicates.std(ddof=1))
        tail = (1 - confidence) / 2
        low, high = (float(q) for q in np.quantile(replicates, [tail, 1 - tail]))
        # A skewed aggregation can put every percentile on one side of the estimate itself:
        # the interval is widened to reach it rather than exclude the one value observed.
        low, high = min(low, diff), max(high, diff)
        below, above = int((replicates <= 0).sum()), int((replicates >= 0).sum())
        p_value = min(1.0, 2 * (min(below, above) + 1) / (iters + 1))
        if units < SMALL_BOOTSTRAP:
            what = "docs" if clusters is None else "clusters"
            notes.append(
                f"bootstrap over {units} {what}: below {SMALL_BOOTSTRAP} the percentile "
                "interval is narrower than its level claims (benchmarks/coverage_atlas.py), so "
                "the interval, p-value and MDE are optimistic"
            )
    if raised:
        notes.append(_warnings_summary(raised))
    note = "; ".join(notes) if notes else None
    return PairedResult(
        n=n,
        mean_a=mean_a,
        mean_b=mean_b,
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
        note=note,
        test=TEST_NONE if math.isnan(p_value) else TEST_BOOTSTRAP,
    )


SMALL_BOOTSTRAP = 30
"""Docs (or clusters) below which a paired bootstrap's interval is marked as optimistic."""


def _warnings_summary(raised: list[warnings.WarningMessage]) -> str:
    """The warnings an aggregation raised during the bootstrap, counted, each kind once."""
    kinds: dict[str, int] = {}
    for w in raised:
        key = f"{w.category.__name__}: {str(w.message).splitlines()[0][:160]}"
        kinds[key] = kinds.get(key, 0) + 1
    shown = "; ".join(f"{text} (×{count})" for text, count in kinds.items())
    return f"the aggregation warned {len(raised)} time(s) over the resamples: {shown}"


def _take(values: Sequence[Any], rows: np.ndarray) -> Any:
    """The values at `rows`: an array indexed at once, any other sequence as a list."""
    if isinstance(values, np.ndarray):
        return values[rows]
    return [values[i] for i in rows]


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
