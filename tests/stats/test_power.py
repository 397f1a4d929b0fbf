"""Power analysis against scipy's normal quantiles and statsmodels' power solver."""

from __future__ import annotations

import math

import pytest
from scipy import stats
from statsmodels.stats.power import NormalIndPower

from assay.stats.power import docs_needed, mde, paired_diff_variance, with_repeats


def test_mde_is_the_sum_of_the_two_quantiles_times_the_stderr():
    assert mde(0.01) == pytest.approx((stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * 0.01)
    assert mde(0.02, confidence=0.99, power=0.9) == pytest.approx(
        (stats.norm.ppf(0.995) + stats.norm.ppf(0.9)) * 0.02
    )


@pytest.mark.parametrize(("variance", "delta"), [(0.2, 0.03), (0.05, 0.01), (0.4, 0.1)])
def test_docs_needed_matches_the_one_sample_z_test_power_solver(variance, delta):
    # A paired comparison is a one-sample z-test on the differences (ratio=0 in statsmodels).
    nobs = NormalIndPower().solve_power(
        effect_size=delta / math.sqrt(variance), alpha=0.05, power=0.8, ratio=0
    )
    assert docs_needed(variance, delta) == math.ceil(nobs - 1e-6)
    n = docs_needed(variance, delta)
    # That many docs detect the difference with at least 80 % power, one fewer does not.
    achieved = NormalIndPower().power(delta / math.sqrt(variance), n, 0.05, ratio=0)
    assert achieved >= 0.8 - 1e-9


def test_paired_variance_and_repeats():
    assert paired_diff_variance(0.25, 0.16, 0.5) == pytest.approx(0.25 + 0.16 - 2 * 0.5 * 0.2)
    # Between-doc part 0.1, within part 0.05 per model: one sample each gives 0.2.
    assert with_repeats(0.2, 0.05, 1) == pytest.approx(0.2)
    assert with_repeats(0.2, 0.05, 4) == pytest.approx(0.1 + 2 * 0.05 / 4)
    with pytest.raises(ValueError, match="half the variance"):
        with_repeats(0.2, 0.15, 2)


@pytest.mark.parametrize("variance", [0.0, float("nan"), -0.1])
def test_docs_needed_refuses_a_variance_that_would_plan_one_doc(variance):
    with pytest.raises(ValueError, match="variance must be > 0"):
        docs_needed(variance, 0.05)


def test_mde_of_an_unestimated_stderr_is_nan_and_a_negative_one_is_refused():
    assert math.isnan(mde(float("nan")))
    with pytest.raises(ValueError, match="standard error must be >= 0"):
        mde(-0.01)
