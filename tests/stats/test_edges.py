"""Every statistic of `assay.stats` at its edges, swept by hypothesis: no docs, one doc, values
all alike, one cluster, proportions at 0 or 1, constant bootstrap resamples.

The same properties hold everywhere: no NaN or infinity is reported as a number without a note
that says why (a NaN is "cannot be estimated", never a value), intervals contain their point
estimate, and an interval has zero width only where the quantity is known exactly (every row of
the population seen).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.stats import agreement, anytime, clustered, exact, multiplicity, normal, online, power
from assay.stats.paired import PairedResult, combine_unweighted, paired_bootstrap, paired_mean

FAST = settings(max_examples=60, deadline=None)
CONFIDENCES = st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.99])

binary_pairs = st.integers(0, 8).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from([0.0, 1.0]), min_size=n, max_size=n),
        st.lists(st.sampled_from([0.0, 1.0]), min_size=n, max_size=n),
    )
)
"""Paired 0/1 scores of up to 8 docs: floors, ceilings and identical runs come up often."""
grid_pairs = st.integers(0, 8).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=n, max_size=n),
        st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=n, max_size=n),
    )
)
"""Paired scores that are not 0/1 (no exact bound applies), as coarse as to repeat often."""


def check_paired(result: PairedResult) -> None:
    """The invariants of a paired comparison (see the module docstring)."""
    numbers = {
        "stderr": result.stderr,
        "ci_low": result.ci_low,
        "ci_high": result.ci_high,
        "p_value": result.p_value,
        "mde": result.mde,
    }
    for name, value in numbers.items():
        assert not math.isinf(value), name
        if math.isnan(value) and result.n:
            assert result.note, f"{name} is NaN without a note"
    if result.stderr == 0 or (result.n and not result.stderr > 0 and result.note is None):
        pytest.fail(f"a stderr of {result.stderr} reported as an estimate")
    if not math.isnan(result.ci_low):
        assert result.ci_low <= result.diff + 1e-12 and result.diff <= result.ci_high + 1e-12
        assert result.ci_high > result.ci_low  # a sample never knows the population exactly
        # An MDE beyond the metric's range is no MDE: NaN, and the note says so.
        assert result.mde > 0 or (math.isnan(result.mde) and "MDE" in (result.note or ""))
    if not math.isnan(result.p_value):
        assert 0 <= result.p_value <= 1
    if result.note is None:
        assert result.stderr > 0 and result.ci_high > result.ci_low


# ---------------------------------------------------------------------- normal.py
@given(CONFIDENCES)
def test_normal_quantiles_are_finite_and_positive(confidence):
    z = normal.two_sided_z(confidence)
    assert math.isfinite(z) and z > 0
    assert normal.two_sided_p(z) == pytest.approx(1 - confidence)


@given(st.floats(allow_nan=False))
def test_a_two_sided_p_value_lies_in_0_1(z):
    assert 0 <= normal.two_sided_p(z) <= 1


@pytest.mark.parametrize("confidence", [0, 1, -0.5, 1.5])
def test_a_confidence_outside_0_1_is_refused(confidence):
    with pytest.raises(ValueError, match="between 0 and 1"):
        normal.two_sided_z(confidence)


# ---------------------------------------------------------------------- paired.py
@FAST
@given(binary_pairs, CONFIDENCES)
def test_paired_mean_of_0_1_scores(pair, confidence):
    a, b = pair
    result = paired_mean(a, b, confidence=confidence)
    check_paired(result)
    if len(a) >= 1:
        # 0/1 scores always have an interval: estimated, or the exact bound.
        assert not math.isnan(result.ci_low)
    if a and a == b:
        assert result.p_value == 1.0 and result.method == "paired-exact-bound"


@FAST
@given(grid_pairs, CONFIDENCES)
def test_paired_mean_of_other_scores(pair, confidence):
    check_paired(paired_mean(*pair, confidence=confidence))


@FAST
@given(binary_pairs, st.integers(1, 3))
def test_clustered_paired_mean(pair, size):
    a, b = pair
    check_paired(paired_mean(a, b, clusters=[i // size for i in range(len(a))]))


@FAST
@given(grid_pairs, st.integers(0, 4))
def test_paired_bootstrap(pair, seed):
    a, b = pair
    if not a:
        return  # the aggregation of no docs is the aggregation's own matter
    result = paired_bootstrap(a, b, np.mean, iters=40, seed=seed)
    check_paired(result)


@FAST
@given(st.lists(binary_pairs.filter(lambda p: len(p[0]) > 0), min_size=1, max_size=3))
def test_combine_unweighted(pairs):
    parts = [paired_mean(a, b) for a, b in pairs]
    check_paired(combine_unweighted(parts))


# ---------------------------------------------------------------------- clustered.py
@FAST
@given(st.lists(st.sampled_from([0.0, 0.5, 1.0]), max_size=10), st.integers(1, 4))
def test_clustered_stderr_is_positive_zero_without_spread_or_nan(values, size):
    labels = [i // size for i in range(len(values))]
    stderr = clustered.clustered_stderr(values, labels)
    assert not math.isinf(stderr)
    if len(values) < 2 or len(set(labels)) < 2:
        assert math.isnan(stderr)  # one unit has no spread to measure
    elif len(set(values)) == 1:
        assert stderr == 0.0
    else:
        assert stderr > 0


# ---------------------------------------------------------------------- power.py
@given(st.floats(1e-6, 1.0), st.floats(0.005, 0.5), CONFIDENCES)
def test_docs_needed_is_the_smallest_n_that_reaches_the_power(variance, delta, confidence):
    n = power.docs_needed(variance, delta, confidence)
    assert n >= 1
    reach = power.mde(math.sqrt(variance / n), confidence)
    assert reach <= delta * (1 + 1e-9)
    if n > 1:
        assert power.mde(math.sqrt(variance / (n - 1)), confidence) > delta * (1 - 1e-9)


@given(st.floats(0, 0.25), st.floats(0, 0.25), st.floats(-1, 1))
def test_paired_variance_is_never_negative(var_a, var_b, correlation):
    assert power.paired_diff_variance(var_a, var_b, correlation) >= -1e-12


# ---------------------------------------------------------------------- exact.py
@given(st.integers(1, 500), CONFIDENCES, st.sampled_from([-1.0, 0.0, 1.0, 0.5]))
def test_the_exact_bound_contains_the_value_and_has_width(units, confidence, value):
    bound = exact.constant_sample_bound(value, units, confidence)
    assert -1 <= bound.low <= value <= bound.high <= 1
    assert bound.high > bound.low and bound.variance > 0
    # The Clopper-Pearson bound for 0 events: (1 - s)^n is exactly 1 - confidence.
    assert (1 - bound.other_share) ** units == pytest.approx(1 - confidence)


@given(st.integers(1, 200), CONFIDENCES)
def test_the_bernoulli_variance_bound_is_at_most_a_quarter(trials, confidence):
    for successes in (0, trials):
        assert 0 < exact.bernoulli_variance_bound(successes, trials, confidence) <= 0.25


# ---------------------------------------------------------------------- agreement.py
labels = st.lists(st.sampled_from(["yes", "no", "maybe"]), max_size=8)


@FAST
@given(labels, st.data())
def test_cohen_kappa_is_nan_or_in_minus_one_one(first, data):
    second = data.draw(
        st.lists(st.sampled_from(["yes", "no"]), min_size=len(first), max_size=len(first))
    )
    kappa = agreement.cohen_kappa(first, second)
    assert math.isnan(kappa) or -1 - 1e-12 <= kappa <= 1 + 1e-12
    if len(first) < 2 or len(set(first) | set(second)) < 2:
        assert math.isnan(kappa)


@FAST
@given(st.integers(0, 3), st.integers(0, 5), st.data())
def test_krippendorff_alpha_is_nan_or_at_most_one(raters, units, data):
    cell = st.sampled_from([0.0, 1.0, 2.0, math.nan])
    rows = [data.draw(st.lists(cell, min_size=units, max_size=units)) for _ in range(raters)]
    alpha = agreement.krippendorff_alpha(rows, "nominal") if rows else math.nan
    assert math.isnan(alpha) or (math.isfinite(alpha) and alpha <= 1 + 1e-12)


# ---------------------------------------------------------------------- multiplicity.py
@given(st.lists(st.one_of(st.none(), st.floats(0, 1)), max_size=8))
def test_holm_never_lowers_a_p_value_and_keeps_the_order(p_values):
    adjusted = multiplicity.holm(p_values)
    assert len(adjusted) == len(p_values)
    pairs = [(p, q) for p, q in zip(p_values, adjusted) if p is not None]
    assert all(q is not None and p <= q <= 1 for p, q in pairs)
    ordered = sorted(pairs, key=lambda pq: pq[0])
    assert all(x[1] <= y[1] for x, y in itertools.pairwise(ordered))
    assert all(q is None for p, q in zip(p_values, adjusted) if p is None)


# ---------------------------------------------------------------------- anytime.py
@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 1.0, 0.5]), min_size=1, max_size=6),
    st.integers(0, 4),
    st.sampled_from(["betting", "eb"]),
)
def test_confidence_sequence_contains_the_running_mean(values, unseen, method):
    population = len(values) + unseen
    looks = list(range(1, len(values) + 1))
    sequence = anytime.confidence_sequence(
        values, population=population, looks=looks, method=method
    )
    assert np.isfinite(sequence.lower).all() and np.isfinite(sequence.upper).all()
    assert (sequence.lower <= sequence.estimate + 1e-9).all()
    assert (sequence.estimate <= sequence.upper + 1e-9).all()
    width = sequence.upper - sequence.lower
    census = sequence.rows >= population
    assert (width[census] == 0).all() and (width[~census] > 0).all()


@settings(max_examples=30, deadline=None)
@given(binary_pairs.filter(lambda p: len(p[0]) > 0), st.integers(0, 3))
def test_paired_confidence_sequence_contains_the_difference(pair, unseen):
    a, b = pair
    sequence = anytime.paired_confidence_sequence(a, b, population=len(a) + unseen)
    assert sequence.lower[-1] <= sequence.estimate[-1] <= sequence.upper[-1]
    assert (sequence.upper[-1] > sequence.lower[-1]) == (unseen > 0)


# ---------------------------------------------------------------------- online.py
@FAST
@given(
    st.lists(st.sampled_from([0.0, 1.0]), max_size=8),
    st.sampled_from(["normal", "wilson", "hoeffding"]),
    st.integers(0, 3),
    st.booleans(),
    st.booleans(),
)
def test_online_mean_interval(values, strategy, unseen, known_population, observed):
    n = len(values)
    population = n + unseen if known_population else None
    mean = sum(values) / n if n else 0.0
    variance = float(np.var(values, ddof=1)) if observed and n > 1 else None
    estimate = online.mean_interval(
        mean,
        n,
        variance=variance,
        population=population,
        settings=online.OnlineSettings(strategy),
    )
    for number in (estimate.value, estimate.lower, estimate.upper, estimate.margin):
        assert math.isfinite(number)
    assert estimate.lower <= estimate.value <= estimate.upper
    known = population is not None and n >= population > 0
    assert (estimate.upper > estimate.lower) == (not known)


@FAST
@given(binary_pairs, st.sampled_from(["normal", "hoeffding", "anytime"]), st.integers(0, 3))
def test_online_paired_difference(pair, strategy, unseen):
    a, b = pair
    estimate = online.paired_difference(
        a,
        b,
        population=len(a) + unseen,
        settings=online.OnlineSettings(strategy),
    )
    assert math.isfinite(estimate.margin)
    assert estimate.lower <= estimate.value <= estimate.upper
    assert (estimate.upper > estimate.lower) == (unseen > 0 or not a)


def test_a_floor_is_not_reported_as_a_known_mean():
    # 12 rows of 200, all wrong: the mean is not known to be 0.
    estimate = online.mean_interval(0.0, 12, variance=0.0, population=200)
    assert estimate.lower == 0.0 and estimate.upper == pytest.approx(1 - 0.05 ** (1 / 12))
    assert estimate.method == "exact bound (no spread in the rows seen)"
