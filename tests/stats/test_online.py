"""Online estimates and intervals, checked against closed-form values and scipy."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from assay.errors import ConfigError
from assay.stats.normal import two_sided_z
from assay.stats.online import (
    OnlineSettings,
    RunningEstimate,
    finite_population_factor,
    hoeffding_margin,
    mean_interval,
    paired_difference,
    total_interval,
    wilson_interval,
)


def test_z_matches_scipy() -> None:
    for level in (0.8, 0.9, 0.95, 0.99):
        assert two_sided_z(level) == pytest.approx(stats.norm.ppf(0.5 + level / 2), rel=1e-9)


def test_fpc_limits() -> None:
    assert finite_population_factor(64, 256) == pytest.approx(math.sqrt(192 / 255))
    assert finite_population_factor(256, 256) == 0.0
    assert finite_population_factor(10, None) == 1.0


def test_normal_bound_variance_accuracy_after_64_of_256() -> None:
    # 0.70 accuracy: bound variance 0.7 * 0.3 on [0, 1], 95 %, FPC sqrt(192/255).
    est = mean_interval(0.70, 64, population=256)
    expected_margin = 1.959964 * math.sqrt(0.21 / 64) * math.sqrt(192 / 255)
    assert est.margin == pytest.approx(expected_margin, rel=1e-5)
    assert est.margin == pytest.approx(0.0974, abs=5e-4)
    assert (est.lower, est.upper) == pytest.approx((0.70 - expected_margin, 0.70 + expected_margin))
    assert est.method.startswith("normal (bound variance)")


def test_bound_variance_on_other_ranges_is_not_uniform_assumption() -> None:
    # Mean 4 on [0, 5]: bound variance (4 - 0) * (5 - 4) = 4, not the uniform 25 / 12.
    est = mean_interval(4.0, 100, value_range=(0, 5), settings=OnlineSettings(use_fpc=False))
    assert est.margin == pytest.approx(two_sided_z(0.95) * math.sqrt(4.0 / 100))


def test_observed_variance_is_used_when_given() -> None:
    scores = [0.0, 0.5, 1.0, 1.0, 0.25, 0.75, 0.5, 0.5]
    var = statistics.variance(scores)
    mean = statistics.fmean(scores)
    est = mean_interval(mean, len(scores), variance=var, settings=OnlineSettings(use_fpc=False))
    z = stats.norm.ppf(0.975)
    assert est.margin == pytest.approx(z * math.sqrt(var / len(scores)))
    assert est.method == "normal (observed variance)"


def test_confidence_level_is_honoured() -> None:
    wide = mean_interval(0.5, 50, settings=OnlineSettings(confidence_level=0.99))
    narrow = mean_interval(0.5, 50, settings=OnlineSettings(confidence_level=0.8))
    assert wide.margin / narrow.margin == pytest.approx(stats.norm.ppf(0.995) / stats.norm.ppf(0.9))


def test_wilson_matches_scipy_binomtest() -> None:
    # (30 events on the rarer side: below 10 the exact interval stands in, tested below)
    est = mean_interval(0.7, 100, settings=OnlineSettings(strategy="wilson", use_fpc=False))
    ci = stats.binomtest(70, 100).proportion_ci(confidence_level=0.95, method="wilson")
    assert (est.lower, est.upper) == pytest.approx((ci.low, ci.high), rel=1e-9)
    assert est.value == 0.7  # point value is the observed mean, not the Wilson centre
    assert wilson_interval(0.0, 20, two_sided_z(0.95))[1] > 0.0  # unlike Wald, not degenerate at 0


def test_wilson_with_fpc_uses_effective_sample_size() -> None:
    est = mean_interval(0.7, 64, population=256, settings=OnlineSettings(strategy="wilson"))
    n_eff = 64 / (192 / 255)
    lo, hi = wilson_interval(0.7, n_eff, two_sided_z(0.95))
    assert (est.lower, est.upper) == pytest.approx((lo, hi))
    assert est.upper - est.lower < 2 * 0.0974 * 1.3


def test_hoeffding_with_serfling_correction() -> None:
    est = mean_interval(0.7, 64, population=256, settings=OnlineSettings(strategy="hoeffding"))
    expected = math.sqrt(math.log(2 / 0.05) * (1 - 63 / 256) / (2 * 64))
    assert est.margin == pytest.approx(expected)
    plain = hoeffding_margin(1.0, 64, 0.95)
    assert plain == pytest.approx(math.sqrt(math.log(40) / 128))
    assert est.margin < plain


def test_interval_is_clipped_to_value_range() -> None:
    est = mean_interval(0.98, 5, settings=OnlineSettings(strategy="hoeffding"))
    assert est.upper == 1.0 and est.lower < 0.98
    assert est.margin > 0.02


def test_zero_width_when_all_rows_are_scored() -> None:
    for strategy in ("normal", "wilson", "hoeffding"):
        est = mean_interval(0.4, 30, population=30, settings=OnlineSettings(strategy=strategy))
        assert est.lower == pytest.approx(0.4) and est.upper == pytest.approx(0.4)


def test_fpc_can_be_switched_off() -> None:
    with_fpc = mean_interval(0.5, 64, population=128)
    without = mean_interval(0.5, 64, population=128, settings=OnlineSettings(use_fpc=False))
    assert with_fpc.margin / without.margin == pytest.approx(math.sqrt(64 / 127))


def test_distributive_total_is_extrapolated_with_interval() -> None:
    # 45 correct of 64 scored rows, 256 rows in all.
    est = total_interval(45, 64, population=256)
    m = 45 / 64
    margin = 1.959964 * math.sqrt(m * (1 - m) / 64) * math.sqrt(192 / 255) * 256
    assert est.value == pytest.approx(180.0)
    assert est.margin == pytest.approx(margin, rel=1e-5)
    assert est.margin == pytest.approx(24.9, abs=0.1)
    assert est.observed == 45
    assert 0 <= est.lower <= est.upper <= 256


def test_paired_difference_uses_pairwise_variance() -> None:
    # Values that are not 0/1 (0/1 rows get compare's exact interval, below).
    a = [0.9] * 8 + [0.2] * 8 + [0.8] * 4
    b = [0.9] * 8 + [0.2] * 8 + [0.3] * 4
    diffs = [x - y for x, y in zip(a, b)]
    est = paired_difference(a, b, settings=OnlineSettings(use_fpc=False))
    se = statistics.stdev(diffs) / math.sqrt(len(diffs))
    assert est.value == pytest.approx(statistics.fmean(diffs))
    assert est.margin == pytest.approx(stats.norm.ppf(0.975) * se)
    assert est.lower > 0  # a is better on these rows
    unpaired = mean_interval(statistics.fmean(a), len(a), settings=OnlineSettings(use_fpc=False))
    assert est.margin < 2 * unpaired.margin


@pytest.mark.parametrize("strategy", ["normal", "wilson"])
def test_paired_zero_one_rows_get_compares_exact_interval_and_cover(strategy) -> None:
    from scipy.stats import binom

    from assay.stats.paired_binary import mcnemar_exact

    settings = OnlineSettings(strategy, use_fpc=False)
    n = 200

    def interval(only_a: int) -> tuple[float, float]:
        est = paired_difference([1] * only_a + [0] * (n - only_a), [0] * n, settings=settings)
        return est.lower, est.upper

    # The interval excludes 0 exactly when McNemar's exact test (compare's `*`) rejects.
    for only_a in range(1, 12):
        a = [1] * only_a + [0] * (n - only_a)
        assert (interval(only_a)[0] > 0) == (mcnemar_exact(a, [0] * n) < 0.05)
    # Exact coverage, every differing row favouring a: the normal interval covered 0.800 at 3
    # expected differing rows, 0.87 at 5.
    bounds = [interval(k) for k in range(41)]  # (0 differing: the no-spread bound)
    for rate in (0.015, 0.01625, 0.0175, 0.025, 0.0325):
        cover = sum(binom.pmf(k, n, rate) for k, (lo, hi) in enumerate(bounds) if lo <= rate <= hi)
        assert cover >= 0.95, (rate, cover)
    est = paired_difference([1] * 4 + [0] * 196, [0] * n, settings=settings)
    assert est.lower < 0 < est.upper and est.method.startswith("paired-exact")


def _live_intervals(n: int, population: int | None) -> list[tuple[float, float]]:
    settings = OnlineSettings("wilson", use_fpc=population is not None)
    return [
        (e.lower, e.upper)
        for e in (
            mean_interval(k / n, n, population=population, settings=settings) for k in range(n + 1)
        )
    ]


@pytest.mark.parametrize("n", [25, 100, 1000])
def test_wilson_gives_way_to_the_exact_interval_below_ten_events(n) -> None:
    # Exact binomial sums: Wilson alone covered 0.838-0.840 just below its lower bound after
    # one event at every n, and 0.84-0.86 at its worst for n <= 150.
    from scipy.stats import binom

    bounds = _live_intervals(n, None)
    lower_after_one = bounds[1][0]
    grid = [lower_after_one * 0.99, *np.linspace(0.001, 0.5, 120)]
    k = np.arange(n + 1)
    covered = [np.array([lo <= p <= hi for lo, hi in bounds]) for p in grid]
    worst = min(float(binom.pmf(k, n, p)[c].sum()) for p, c in zip(grid, covered))
    assert worst >= 0.90, worst


@pytest.mark.parametrize("n", [50, 450])
def test_wilson_with_the_finite_population_correction_covers(n) -> None:
    # Rows drawn without replacement from N = 2n (hypergeometric sums): the minimum was 0.875
    # at 4 ones in the population; and n = 450 of N = 500 one 1 left unseen.
    from scipy.stats import hypergeom

    for population in (2 * n, n + 50):
        bounds = _live_intervals(n, population)
        k = np.arange(n + 1)
        worst = 1.0
        for ones in range(0, population // 2 + 1):
            p = ones / population
            mass = hypergeom.pmf(k, population, ones, n)
            worst = min(worst, sum(w for w, (lo, hi) in zip(mass, bounds) if lo <= p <= hi))
        assert worst >= 0.90, (population, worst)


def test_paired_difference_hoeffding_uses_doubled_range() -> None:
    est = paired_difference(
        [1, 0, 1, 1], [0, 0, 1, 0], settings=OnlineSettings("hoeffding", use_fpc=False)
    )
    assert est.margin == pytest.approx(2 * math.sqrt(math.log(40) / 8))


def test_settings_from_kwargs_and_validation() -> None:
    s = OnlineSettings.from_kwargs(
        {"strategy_name": "wilson", "confidence_level": 0.9, "use_fpc": False}
    )
    assert s == OnlineSettings("wilson", 0.9, False)
    assert OnlineSettings.from_kwargs(None) == OnlineSettings()
    with pytest.raises(ConfigError, match="strategy"):
        OnlineSettings.from_kwargs({"strategy_name": "bootstrap"})
    with pytest.raises(ConfigError, match="confidence_level"):
        OnlineSettings.from_kwargs({"confidence_level": 95})
    with pytest.raises(ConfigError, match="unknown key"):
        OnlineSettings.from_kwargs({"level": 0.9})
    with pytest.raises(ConfigError, match="value_range"):
        mean_interval(0.5, 10, value_range=(1, 0))


@given(
    st.lists(st.floats(-100, 100), min_size=0, max_size=30),
    st.lists(st.floats(-100, 100), min_size=0, max_size=30),
)
def test_running_estimate_matches_statistics(xs: list[float], ys: list[float]) -> None:
    left, right = RunningEstimate(), RunningEstimate()
    left.extend(xs)
    right.extend(ys)
    both = left.merge(right)
    data = xs + ys
    assert both.n == len(data)
    if data:
        assert both.mean == pytest.approx(statistics.fmean(data), abs=1e-9)
    if len(data) > 1:
        assert both.variance == pytest.approx(statistics.variance(data), rel=1e-6, abs=1e-6)
    else:
        assert both.variance is None


def test_the_anytime_strategy_needs_the_scores_in_order():
    settings = OnlineSettings.from_kwargs({"strategy": "anytime"})
    assert settings.strategy == "anytime"
    with pytest.raises(ValueError, match=r"assay\.stats\.anytime"):
        mean_interval(0.5, 10, population=100, settings=settings)
    with pytest.raises(ConfigError, match="population size"):
        paired_difference([1.0, 0.0], [0.0, 0.0], settings=settings)
    diff = paired_difference([1.0, 0.0, 1.0], [0.0, 0.0, 1.0], population=3, settings=settings)
    assert diff.lower == diff.upper == pytest.approx(1 / 3)  # every row: the exact difference
