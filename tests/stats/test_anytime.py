"""Anytime-valid confidence sequences for sampling without replacement.

Expected values come from the paper's definitions written out here as plain loops (not from the
vectorised code under test), from closed forms (a census has no uncertainty; k ones seen out of
N bound the mean below by k/N), and from a simulation of repeated looks.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from assay.errors import ConfigError
from assay.stats.anytime import confidence_sequence, paired_confidence_sequence

ALPHA = 0.05


def plug_in_bets(y: list[float], cap: float = 0.5) -> tuple[list[float], list[float]]:
    """λ_i = sqrt(2 log(2/α) / (σ̂²_{i-1} i log(1+i))) ∧ cap and μ̂_{i-1}, with one prior
    observation of mean 1/2 and variance 1/4 (Waudby-Smith & Ramdas)."""
    bets, means = [], []
    total, squares = 0.5, 0.25
    mean_prev, var_prev = 0.5, 0.25
    for i, v in enumerate(y, start=1):
        bet = math.sqrt(2 * math.log(2 / ALPHA) / (var_prev * i * math.log(1 + i)))
        bets.append(min(bet, cap))
        means.append(mean_prev)
        total += v
        mean = total / (i + 1)
        squares += (v - mean) ** 2
        mean_prev, var_prev = mean, squares / (i + 1)
    return bets, means


def wor_mean(m: float, population: int, seen: list[float]) -> float:
    """Mean of the rows not drawn yet, if the population mean is m."""
    return (population * m - sum(seen)) / (population - len(seen))


def eb_lower_by_hand(y: list[float], population: int) -> float:
    """Smallest m the empirical-Bernstein supermartingale does not reject at level α/2."""
    bets, means = plug_in_bets(y)
    gain = weight = 0.0
    for i, v in enumerate(y):
        lam = bets[i]
        psi = -math.log(1 - lam) - lam
        # μ_i(m) = a·m + b: affine in m, so the rejection boundary solves a linear equation.
        a = population / (population - i)
        b = -sum(y[:i]) / (population - i)
        gain += lam * (v - b) - (v - means[i]) ** 2 * psi
        weight += lam * a
    return max((gain - math.log(2 / ALPHA)) / weight, sum(y) / population)


def betting_set_by_hand(y: list[float], population: int, grid: np.ndarray) -> list[float]:
    """Grid points m that the hedged capital process has not rejected after all of y; the bets
    are truncated at 1/(2μ) for the upward process and 1/(2(1-μ)) for the downward one."""
    bets, _ = plug_in_bets(y, cap=math.inf)
    kept = []
    for m in grid:
        up = down = 0.0
        possible = True
        for i, v in enumerate(y):
            mu = wor_mean(m, population, y[:i])
            if not 0.0 <= mu <= 1.0:
                possible = False
                break
            up_bet = min(bets[i], 0.5 / mu) if mu > 0 else bets[i]
            down_bet = min(bets[i], 0.5 / (1 - mu)) if mu < 1 else bets[i]
            up += math.log(1 + up_bet * (v - mu))
            down += math.log(1 - down_bet * (v - mu))
        if possible and max(up, down) < math.log(2 / ALPHA):
            kept.append(float(m))
    return kept


def sample(population: np.ndarray, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).permutation(population)


def test_empirical_bernstein_matches_the_formula_written_out() -> None:
    rng = np.random.default_rng(3)
    y = list(rng.beta(2, 3, size=60))
    for n in (10, 30, 60):
        cs = confidence_sequence(y[:n], population=100, method="eb")
        assert cs.lower[0] == pytest.approx(eb_lower_by_hand(y[:n], 100), abs=1e-12)
        flipped = [1 - v for v in y[:n]]
        assert cs.upper[0] == pytest.approx(1 - eb_lower_by_hand(flipped, 100), abs=1e-12)


def test_betting_interval_is_the_unrejected_set_and_never_narrower() -> None:
    population = np.array([1.0] * 30 + [0.0] * 20 + [0.5] * 10)
    y = list(sample(population, 0)[:25])
    grid = np.linspace(0, 1, 2001)
    kept = betting_set_by_hand(y, len(population), grid)
    cs = confidence_sequence(y, population=len(population), method="betting")
    step = grid[1] - grid[0]
    # Same set up to the grid's resolution, and every unrejected grid point inside ours.
    assert cs.lower[0] <= kept[0] <= cs.lower[0] + step
    assert cs.upper[0] - step <= kept[-1] <= cs.upper[0]


def test_a_census_is_exact_and_seen_values_bound_the_mean() -> None:
    population = sample(np.array([1.0] * 37 + [0.0] * 63), 1)
    cs = confidence_sequence(population, population=100, looks=[10, 50, 100])
    assert cs.lower[-1] == cs.upper[-1] == cs.estimate[-1] == pytest.approx(0.37)
    ones_seen = population[:50].sum()
    zeros_seen = 50 - ones_seen
    assert cs.lower[1] >= ones_seen / 100  # the unseen 50 rows may all be zeros
    assert cs.upper[1] <= 1 - zeros_seen / 100
    assert np.all(np.diff(cs.lower) >= 0) and np.all(np.diff(cs.upper) <= 0)
    # On another scale the sequence is the same, rescaled.
    scaled = confidence_sequence(
        10 * population - 5, population=100, value_range=(-5, 5), looks=[10, 50, 100]
    )
    assert scaled.lower == pytest.approx(10 * cs.lower - 5)
    assert scaled.upper == pytest.approx(10 * cs.upper - 5)


def test_batches_of_rows_count_as_their_mean() -> None:
    rows = sample(np.array([1.0] * 120 + [0.0] * 80), 2)
    batch_means = rows.reshape(20, 10).mean(axis=1)
    cs = confidence_sequence(batch_means, population=200, counts=[10] * 20, looks=[5, 10, 20])
    assert list(cs.rows) == [50, 100, 200]
    assert cs.estimate[:2] == pytest.approx([rows[:50].mean(), rows[:100].mean()])
    assert cs.lower[0] < rows.mean() < cs.upper[0]
    assert cs.lower[-1] == cs.upper[-1] == pytest.approx(0.6)


def test_repeated_looks_keep_the_error_rate_of_every_form() -> None:
    """Looking after every shard, the anytime sequences miss the truth at most α of the time;
    the fixed-n normal interval, looked at as often, misses far more often."""
    runs, size, looks = 300, 200, list(range(25, 201, 25))
    rng = np.random.default_rng(11)
    misses = {"betting": 0, "eb": 0, "normal": 0}
    z = 1.959963984540054
    for _ in range(runs):
        population = (rng.random(size) < rng.uniform(0.2, 0.8)).astype(float)
        truth = population.mean()
        order = rng.permutation(population)
        for method in ("betting", "eb"):
            cs = confidence_sequence(order, population=size, looks=looks, method=method)
            misses[method] += not cs.covers(truth).all()
        normal_missed = False
        for n in looks[:-1]:
            mean = order[:n].mean()
            fpc = math.sqrt((size - n) / (size - 1))
            margin = z * math.sqrt(mean * (1 - mean) / n) * fpc
            normal_missed |= abs(mean - truth) > margin
        misses["normal"] += normal_missed
    limit = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / runs)
    assert misses["betting"] / runs <= limit
    assert misses["eb"] / runs <= limit
    assert misses["normal"] / runs > 2 * ALPHA


def test_paired_differences_see_what_marginals_cannot() -> None:
    """Config A beats B by 0.1 on every row; both vary a lot from row to row."""
    rng = np.random.default_rng(5)
    base = rng.uniform(0.0, 0.9, size=400)
    a, b = base + 0.1, base
    looks = [100, 200, 300]
    paired = paired_confidence_sequence(a, b, population=400, looks=looks)
    assert np.all(paired.lower > 0.0) and np.all(paired.covers(0.1))
    marginal_a = confidence_sequence(a, population=400, looks=looks)
    marginal_b = confidence_sequence(b, population=400, looks=looks)
    assert marginal_b.upper[0] > marginal_a.lower[0]  # the marginals overlap at 100 rows
    assert paired.estimate == pytest.approx([0.1, 0.1, 0.1])


def test_inputs_are_checked() -> None:
    with pytest.raises(ConfigError, match="outside value_range"):
        confidence_sequence([0.2, 1.5], population=10)
    with pytest.raises(ConfigError, match="confidence_level"):
        confidence_sequence([0.2], population=10, confidence_level=1.0)
    with pytest.raises(ValueError, match="population"):
        confidence_sequence([0.2] * 11, population=10)
    with pytest.raises(ValueError, match="looks"):
        confidence_sequence([0.2, 0.3], population=10, looks=[3])
    with pytest.raises(ConfigError, match="method"):
        confidence_sequence([0.2], population=10, method="bogus")  # type: ignore[arg-type]
