"""The exact power of assay's own 0/1 test, against the test itself: every (differing docs,
docs favouring b) configuration is run through `paired_mean` and weighted by its probability."""

from __future__ import annotations

import pytest
from scipy.stats import binom

from assay.stats.binary_power import binary_docs_needed, discordance, exact_power
from assay.stats.paired import paired_mean
from assay.stats.power import binary_variance_floor, docs_needed


def _brute_force_power(n: int, variance: float, difference: float) -> float:
    """Σ over D and k of P(D, k) · [paired_mean rejects in δ's direction], D up to where
    Bin(n, ψ) has mass left."""
    share, favour = discordance(variance, difference)
    top = int(binom.isf(1e-12, n, share)) + 1
    total = 0.0
    for discordant in range(1, min(n, top) + 1):
        weight = binom.pmf(discordant, n, share)
        for k in range(discordant + 1):
            a = [0.0] * (n - discordant) + [0.0] * k + [1.0] * (discordant - k)
            b = [0.0] * (n - discordant) + [1.0] * k + [0.0] * (discordant - k)
            if difference < 0:
                a, b = b, a
            r = paired_mean(a, b)
            toward = r.diff > 0 if difference > 0 else r.diff < 0
            if r.p_value < 0.05 and toward:
                total += weight * binom.pmf(k, discordant, favour)
    return total


@pytest.mark.parametrize(
    ("n", "variance", "difference"),
    [
        (157, 0.0, 0.05),  # all differences one-sided: McNemar's exact test decides
        (60, 0.24, 0.1),  # D around 15: both the exact and the normal test
        (40, 0.3, -0.2),  # a difference favouring a
    ],
)
def test_exact_power_is_the_power_of_paired_mean_itself(n, variance, difference):
    assert exact_power(n, variance, difference) == pytest.approx(
        _brute_force_power(n, variance, difference), abs=1e-9
    )


def test_two_all_wrong_runs_plan_enough_docs_for_their_power():
    # The normal formula on the floor 0.05·0.95 plans 150 docs, where McNemar's exact test
    # (about 7.5 differing docs) reaches 0.77; the plan is the first n that reaches 0.80.
    floor = binary_variance_floor(0.05)
    assert docs_needed(floor, 0.05) == 150
    assert exact_power(150, 0.0, 0.05) < 0.8
    n = binary_docs_needed(0.003, 0.05)
    assert exact_power(n, 0.0, 0.05) >= 0.8 > exact_power(n - 1, 0.0, 0.05)
    assert n >= 150


def test_plans_with_many_differing_docs_follow_mcnemar_not_the_normal_formula():
    # McNemar's exact test decides every 0/1 row: a little more conservative than the normal
    # formula (471 docs) even with about 100 differing docs.
    n = binary_docs_needed(0.15, 0.05)
    assert exact_power(n, 0.15, 0.05) >= 0.8 > exact_power(n - 1, 0.15, 0.05)
    assert docs_needed(0.15, 0.05) == 471 < n < 1.15 * 471
