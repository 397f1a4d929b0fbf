"""Paired comparisons against closed forms computed with scipy and statsmodels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import f1_score
from statsmodels.stats.contingency_tables import mcnemar

from assay.stats.binary_power import exact_power
from assay.stats.clustered import cluster_degrees_of_freedom, cr2_variance_of_mean
from assay.stats.paired import mcnemar_exact, paired_bootstrap, paired_mean


def _runs(n: int = 200, seed: int = 0) -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(seed)
    skill = rng.uniform(size=n)
    a = (rng.uniform(size=n) < skill).astype(float)
    b = (rng.uniform(size=n) < np.clip(skill + 0.08, 0, 1)).astype(float)
    return a.tolist(), b.tolist()


def test_every_statistic_of_a_paired_mean_against_scipy():
    # Scores that are not 0/1 (0/1 scores are decided by McNemar's exact test, below).
    a, b = (list(np.asarray(v) * 0.5 + 0.25 * np.arange(200) % 0.5) for v in _runs())
    result = paired_mean(a, b, confidence=0.9)
    d = np.asarray(b) - np.asarray(a)
    se = stats.sem(d)
    assert result.n == 200
    assert result.mean_a == pytest.approx(np.mean(a))
    assert result.mean_b == pytest.approx(np.mean(b))
    assert result.diff == pytest.approx(np.mean(b) - np.mean(a))
    assert result.stderr == pytest.approx(se, rel=1e-12)
    low, high = stats.norm.interval(0.9, loc=d.mean(), scale=se)
    assert (result.ci_low, result.ci_high) == (pytest.approx(low), pytest.approx(high))
    assert result.confidence == 0.9
    assert result.p_value == pytest.approx(2 * stats.norm.sf(abs(d.mean() / se)), rel=1e-9)
    assert result.mde == pytest.approx((stats.norm.ppf(0.95) + stats.norm.ppf(0.8)) * se)
    assert result.clusters is None and result.method == "paired" and result.test == "normal"


def test_0_1_scores_are_decided_by_mcnemar_whatever_the_count_of_differing_docs():
    # 36 of 1,000 docs differ, 24 favouring b: the normal test says p 0.045, McNemar 0.065.
    # The row's p-value, its interval and its McNemar column must tell the same story.
    a, b = [0.0] * 1000, [0.0] * 1000
    b[:24] = [1.0] * 24
    a[24:36] = [1.0] * 12
    result = paired_mean(a, b)
    mcnemar = 2 * stats.binom.cdf(12, 36, 0.5)
    assert result.p_value == pytest.approx(mcnemar) == result.mcnemar_p
    assert result.p_value > 0.05 and result.ci_low < 0 < result.ci_high
    assert result.test == "McNemar exact" and result.method == "paired-exact"
    # The MDE is the exact power's: that power is 0.8 at the MDE and below it just under.
    variance = float(np.var(np.asarray(b) - np.asarray(a), ddof=1))
    assert (
        exact_power(1000, variance, result.mde)
        >= 0.8
        > exact_power(1000, variance, result.mde - 2e-4)
    )


def test_paired_interval_is_narrower_than_separate_intervals():
    a, b = _runs()
    separate = math.hypot(stats.sem(a), stats.sem(b))
    assert paired_mean(a, b).stderr < separate


def test_identical_runs_have_no_estimated_stderr_but_an_exact_bound():
    a, _ = _runs()
    result = paired_mean(a, a)
    assert result.diff == 0 and result.p_value == 1.0 and result.mcnemar_p == 1.0
    # No doc differs in 200: the share that could differ is at most 1 - 0.05^(1/200) (95 %).
    share = 1 - 0.05 ** (1 / 200)
    assert math.isnan(result.stderr)
    assert result.ci_low == pytest.approx(-share) and result.ci_high == pytest.approx(share)
    assert share == pytest.approx(3 / 200, rel=0.01)  # the rule of three
    # The MDE is where McNemar's exact test reaches 80 % power on 200 docs (about 0.039,
    # more than the normal formula's z²/(n + z²) = 0.038 on the variance floor δ(1 - δ)).
    assert exact_power(200, share, result.mde) >= 0.8 > exact_power(200, share, result.mde - 2e-4)
    z2 = 2.8016**2
    assert result.mde > z2 / (200 + z2)
    assert result.method == "paired-exact-bound"
    assert "Clopper-Pearson 95% upper bound" in (result.note or "")


def test_twelve_docs_all_wrong_in_both_runs_do_not_claim_a_tiny_mde():
    # The user's report: both runs score 0 on all 12 docs.
    result = paired_mean([0.0] * 12, [0.0] * 12)
    share = 1 - 0.05 ** (1 / 12)
    assert (result.ci_low, result.ci_high) == pytest.approx((-share, share))
    assert result.mde > 0.3 and result.stderr_bound == pytest.approx(math.sqrt(share / 12))


def test_a_constant_nonzero_binary_difference_gets_the_exact_sign_test_and_bound():
    result = paired_mean([0.0] * 10, [1.0] * 10)
    kept = 0.025 ** (1 / 10)  # lower bound (two-sided test: α/2) on the share where b - a = 1
    assert result.diff == 1 and math.isnan(result.stderr)
    assert (result.ci_low, result.ci_high) == pytest.approx((2 * kept - 1, 1.0))
    assert result.p_value == pytest.approx(2 * 0.5**10) == result.mcnemar_p
    assert "exact sign test over the 10 docs" in (result.note or "")


def test_a_constant_nonzero_difference_of_other_values_is_not_estimable():
    result = paired_mean([0.2, 0.4, 0.6], [0.5, 0.7, 0.9])
    assert result.diff == pytest.approx(0.3) and result.mcnemar_p is None  # not 0/1 values
    assert all(math.isnan(v) for v in (result.stderr, result.ci_low, result.ci_high))
    assert math.isnan(result.p_value) and math.isnan(result.mde)
    assert "no bound stands in" in (result.note or "")


@pytest.mark.parametrize("n", [0, 1])
def test_fewer_than_two_docs(n):
    result = paired_mean([1.0] * n, [1.0] * n)
    assert math.isnan(result.stderr) and result.note
    if n == 1:  # one 0/1 doc still bounds the difference: at most 95 % of docs differ
        assert (result.ci_low, result.ci_high) == pytest.approx((-0.95, 0.95))


def test_one_cluster_has_no_clustered_stderr():
    a, b = _runs(30, seed=5)
    result = paired_mean(a, b, clusters=["p"] * 30)
    assert math.isnan(result.stderr) and math.isnan(result.ci_low) and math.isnan(result.mde)
    assert "one cluster" in (result.note or "")


def test_clustered_form_replaces_the_standard_error():
    a, b = _runs(120, seed=3)
    groups = [i // 4 for i in range(120)]
    result = paired_mean(a, b, clusters=groups)
    d = np.asarray(b) - np.asarray(a)
    assert result.stderr == pytest.approx(math.sqrt(cr2_variance_of_mean(d, groups)), rel=1e-12)
    assert result.clusters == 30 and result.method == "paired-clustered"
    t = stats.t.ppf(0.975, 29)  # 30 equal clusters: Bell-McCaffrey's t has G - 1 = 29 dof
    assert result.ci_high - result.ci_low == pytest.approx(2 * t * result.stderr)


@pytest.mark.parametrize("seed", [0, 1, 2, 5])
def test_mcnemar_exact_against_statsmodels_and_scipy(seed):
    a, b = _runs(60, seed)
    a_, b_ = np.asarray(a, int), np.asarray(b, int)
    table = [
        [int(((a_ == 1) & (b_ == 1)).sum()), int(((a_ == 1) & (b_ == 0)).sum())],
        [int(((a_ == 0) & (b_ == 1)).sum()), int(((a_ == 0) & (b_ == 0)).sum())],
    ]
    expected = mcnemar(table, exact=True).pvalue
    assert mcnemar_exact(a, b) == pytest.approx(expected, rel=1e-12)
    discordant = table[0][1] + table[1][0]
    assert mcnemar_exact(a, b) == pytest.approx(
        stats.binomtest(table[0][1], discordant, 0.5).pvalue, rel=1e-12
    )


def test_mcnemar_takes_bools_and_refuses_other_values():
    assert mcnemar_exact([True, False, True], [True, True, True]) == 1.0
    assert mcnemar_exact([0.5, 1.0], [1.0, 1.0]) is None


def _reference_bootstrap(a, b, fn, iters, seed, confidence):
    """The documented resampling, written out independently."""
    rng = np.random.default_rng(seed)
    n = len(a)
    reps = []
    for _ in range(iters):
        idx = rng.integers(0, n, n)
        reps.append(fn([b[i] for i in idx]) - fn([a[i] for i in idx]))
    reps = np.asarray(reps)
    tail = (1 - confidence) / 2
    p = min(1.0, 2 * (min((reps <= 0).sum(), (reps >= 0).sum()) + 1) / (iters + 1))
    return np.std(reps, ddof=1), np.quantile(reps, tail), np.quantile(reps, 1 - tail), p


def _f1(pairs):
    golds, preds = zip(*pairs)
    return f1_score(golds, preds)


def test_paired_bootstrap_of_a_corpus_level_f1():
    rng = np.random.default_rng(7)
    golds = rng.integers(0, 2, 150)
    a = [(int(g), int(g if rng.uniform() < 0.6 else 1 - g)) for g in golds]
    b = [(int(g), int(g if rng.uniform() < 0.8 else 1 - g)) for g in golds]
    result = paired_bootstrap(a, b, _f1, iters=300, seed=11)
    se, low, high, p = _reference_bootstrap(a, b, _f1, 300, 11, 0.95)
    assert result.diff == pytest.approx(_f1(b) - _f1(a))
    assert (result.mean_a, result.mean_b) == (pytest.approx(_f1(a)), pytest.approx(_f1(b)))
    assert result.stderr == pytest.approx(se, rel=1e-12)
    assert (result.ci_low, result.ci_high) == (pytest.approx(low), pytest.approx(high))
    assert result.p_value == pytest.approx(p)
    assert result.method == "paired-bootstrap" and result.mcnemar_p is None


def test_bootstrap_of_a_mean_agrees_with_the_closed_form():
    a, b = _runs(400, seed=4)
    boot = paired_bootstrap(a, b, np.mean, iters=2000, seed=0)
    assert boot.stderr == pytest.approx(stats.sem(np.asarray(b) - np.asarray(a)), rel=0.1)


def test_bootstrap_of_identical_runs_has_p_one_and_no_estimated_spread():
    a, _ = _runs(50)
    result = paired_bootstrap(a, a, np.mean, iters=100, seed=0)
    assert result.diff == 0 and result.p_value == 1.0
    assert math.isnan(result.stderr) and math.isnan(result.ci_low) and math.isnan(result.mde)
    assert "all 100 bootstrap resamples give the same difference" in (result.note or "")


def test_bootstrap_of_one_doc_or_one_cluster_has_no_spread():
    one = paired_bootstrap([0.0], [1.0], np.mean, iters=10)
    assert math.isnan(one.stderr) and math.isnan(one.p_value) and "1 doc(s)" in (one.note or "")
    a, b = _runs(20)
    single = paired_bootstrap(a, b, np.mean, clusters=["x"] * 20, iters=10)
    assert math.isnan(single.ci_high) and "in 1 cluster(s)" in (single.note or "")


def test_cluster_bootstrap_resamples_whole_clusters():
    # Clusters entirely right or wrong for run b, a constant for run a.
    b = [float(c % 2) for c in range(10) for _ in range(6)]
    a = [0.5] * 60
    clusters = [c for c in range(10) for _ in range(6)]
    plain = paired_bootstrap(a, b, np.mean, iters=500, seed=1)
    clustered = paired_bootstrap(a, b, np.mean, clusters=clusters, iters=500, seed=1)
    assert clustered.clusters == 10 and clustered.method == "paired-cluster-bootstrap"
    # Ten clusters of six: the standard error of a mean of 10 coin flips, about 0.5/√10.
    assert clustered.stderr == pytest.approx(0.5 / math.sqrt(10), rel=0.15)
    assert clustered.stderr > 2 * plain.stderr


def test_clusters_whose_means_agree_up_to_rounding_have_no_clustered_stderr():
    # Two clusters whose mean differences agree but for the last bit: CR2 gave a stderr of
    # about 1e-16, an interval [-0, 0], p 1 and an MDE of 6e-16, as if the difference were known.
    a = [0.1 * i % 1 for i in range(40)]
    b = [(0.1 * i + 0.2 * (i % 2)) % 1 for i in range(40)]
    result = paired_mean(a, b, clusters=[i % 2 for i in range(40)])
    assert math.isnan(result.stderr) and math.isnan(result.ci_low) and math.isnan(result.mde)
    assert "same mean difference (up to rounding)" in (result.note or "")


def _unequal_cluster_coverage(sizes: list[int], reps: int, seed: int) -> tuple[float, int]:
    """Coverage of the shipped clustered interval (true difference 0; a cluster shift of sd
    0.3 and doc noise of sd 1), and how many of the intervals were marked."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(len(sizes)), sizes)
    covered = marked = 0
    for _ in range(reps):
        d = rng.normal(0, 0.3, len(sizes))[labels] + rng.normal(0, 1, labels.size)
        r = paired_mean(np.zeros_like(d).tolist(), d.tolist(), clusters=labels.tolist())
        covered += r.ci_low <= 0 <= r.ci_high
        marked += r.note is not None
    return covered / reps, marked


@pytest.mark.parametrize("sizes", [[200, 5, 5, 5, 5], [300, *[5] * 9], [100, 100, 2, 2]])
def test_unequal_clusters_read_against_bell_mccaffrey_degrees_of_freedom_cover(sizes):
    # t(G - 1) covered 0.48-0.81 on these layouts; Bell-McCaffrey's dof (1.1-1.3) hold 0.9.
    # Fewer than 25 clusters: the p-value is the sign-flip test's and the interval is marked.
    coverage, marked = _unequal_cluster_coverage(sizes, reps=300, seed=7)
    assert coverage >= 0.90 and marked == 300
    labels = np.repeat(np.arange(len(sizes)), sizes).tolist()
    rng = np.random.default_rng(1)
    d = rng.normal(size=len(labels))
    r = paired_mean([0.0] * len(labels), d.tolist(), clusters=labels)
    t = stats.t.ppf(0.975, cluster_degrees_of_freedom(labels))
    assert r.ci_high - r.ci_low == pytest.approx(2 * t * r.stderr, rel=1e-9)
    assert r.test == "sign-flip exact"


def test_one_cluster_holding_nearly_every_doc_marks_the_interval():
    # 1000,1,1,1 covered 0.44 even with Bell-McCaffrey's dof (which cannot fall below ~1).
    coverage, marked = _unequal_cluster_coverage([500, 2, 2], reps=100, seed=3)
    assert marked == 100 and coverage < 0.9
    rng = np.random.default_rng(2)
    labels = [0] * 200 + [1] * 5 + [2] * 5
    r = paired_mean([0.0] * 210, rng.normal(size=210).tolist(), clusters=labels)
    assert "one cluster holds 200 of the 210 docs (more than 93%)" in (r.note or "")
    assert "unreliable" in (r.note or "")


def test_values_whose_squares_overflow_are_compared_at_a_smaller_scale():
    # The difference of means of 1e300-sized values is representable: it is computed, and so
    # are the stderr and interval (the squares overflowed and nothing was shown before).
    r = paired_mean([1e300] * 5, [1e300] * 4 + [-1e300])
    assert r.diff == pytest.approx(-4e299) and r.stderr == pytest.approx(4e299)
    assert "floating point" not in (r.note or "")
    a = [1e300 * i for i in range(40)]
    b = [1e300 * (i + i % 3) for i in range(40)]
    r, small = paired_mean(a, b), paired_mean(list(range(40)), [i + i % 3 for i in range(40)])
    assert r.ci_low == pytest.approx(small.ci_low * 1e300) and r.p_value == pytest.approx(
        small.p_value
    )
    assert r.mean_a == pytest.approx(19.5e300) and r.note is None
    # A difference of means beyond floating point is not shown; the p-value has no scale.
    r = paired_mean([-1.5e308, -1.4e308] * 15, [1.5e308, 1.4e308] * 15)
    assert math.isnan(r.diff) and math.isnan(r.ci_high) and r.p_value < 0.001
    assert "the difference, interval's lower end, interval's upper end exceed" in (r.note or "")
    assert r.stderr == pytest.approx(paired_mean([-1.5, -1.4] * 15, [1.5, 1.4] * 15).stderr * 1e308)


def test_one_doc_says_once_that_it_has_no_mde():
    note = paired_mean([0.0], [1.0]).note or ""
    assert "MDE: none below 1" in note and "the MDE's basis" not in note
    note = paired_mean([0.0] * 1000, [0.0] * 1000).note or ""
    assert "variance bound 0.002991, the MDE's basis" in note and "none below 1" not in note


def _skewed_coverage(share: float, n: int, reps: int, seed: int) -> tuple[float, float, float]:
    """One-sided, heavy-tailed differences on a share of n docs (the rest 0): the coverage
    of the normal interval over all draws, over the unmarked ones, and the share unmarked."""
    rng = np.random.default_rng(seed)
    truth = share * float(
        np.mean(np.minimum(np.random.default_rng(9).lognormal(-4, 1.5, 10**6), 1))
    )
    covered, unmarked = [], []
    for _ in range(reps):
        d = (rng.uniform(size=n) < share) * np.minimum(rng.lognormal(-4, 1.5, n), 1.0)
        r = paired_mean([0.0] * n, d.tolist())
        if math.isnan(r.ci_low):
            continue
        covered.append(r.ci_low <= truth <= r.ci_high)
        unmarked.append(r.note is None)
    hit, plain = np.asarray(covered), np.asarray(unmarked)
    return float(hit.mean()), float(hit[plain].mean()) if plain.any() else math.nan, plain.mean()


def test_skewed_differences_on_few_differing_docs_are_marked():
    # 5 % of 1,000 docs differ, one way, by heavy-tailed amounts: the normal interval covers
    # about 0.86 (the tester's 0.87-0.89), and every such interval is now marked.
    overall, _, unmarked = _skewed_coverage(0.05, 1000, reps=150, seed=4)
    assert overall < 0.92 and unmarked == 0
    d = np.zeros(1000)
    d[:40] = np.geomspace(0.001, 1, 40)
    note = paired_mean([0.0] * 1000, d.tolist()).note or ""
    assert "skewed (sample skewness +" in note and "only 40 of the 1000 docs differ" in note
    # Symmetric differences on as few docs are not marked; nor skewed ones on 100+ docs whose
    # differing amounts are spread evenly; amounts spread over three decades are (their bulk).
    assert paired_mean([0.0] * 1000, [*np.linspace(-1, 1, 40), *[0.0] * 960]).note is None
    d[:150] = np.linspace(0.01, 1, 150)
    assert paired_mean([0.0] * 1000, d.tolist()).note is None
    d[:150] = np.geomspace(0.001, 1, 150)
    assert "percentiles of the 150 differing docs" in (paired_mean([0.0] * 1000, d).note or "")


def _lognormal_unmarked(sigma: float, n: int, reps: int) -> tuple[float, int]:
    """Coverage of the intervals shown unmarked on lognormal differences, and how many."""
    rng = np.random.default_rng(0)
    covered = []
    for _ in range(reps):
        base = rng.uniform(0, 10, n)
        r = paired_mean(base, base + rng.lognormal(0, sigma, n))
        if r.note is None:
            covered.append(r.ci_low <= math.exp(sigma**2 / 2) <= r.ci_high)
    return (float(np.mean(covered)) if covered else math.nan), len(covered)


def test_lognormal_samples_that_missed_their_tail_are_marked_by_their_bulk():
    # Cochran's rule on the sample skewness left 68 of 400 draws unmarked at sigma 1, n=100
    # (covering 0.75) and 72 at sigma 1.5, n=1000 (0.82): the bulk's skewness marks them.
    for sigma, n in [(1.0, 100), (1.5, 1000)]:
        coverage, unmarked = _lognormal_unmarked(sigma, n, reps=120)
        assert unmarked <= 3 or coverage >= 0.90, (sigma, n, coverage, unmarked)
    rng = np.random.default_rng(2)
    base = rng.uniform(0, 10, 100)
    d = rng.lognormal(0, 1, 100)
    d = np.minimum(d, np.quantile(d, 0.95))  # a sample whose tail fell short
    note = paired_mean(base, base + d).note or ""
    assert "as lopsided as a lognormal's of skewness" in note
    # Exponential differences on 1,000 docs and symmetric ones on 100 are not marked.
    assert paired_mean(base, base + rng.normal(size=100)).note is None
    many = rng.uniform(0, 10, 1000)
    assert paired_mean(many, many + rng.exponential(1.0, 1000)).note is None


def test_singleton_clusters_are_the_unclustered_comparison_with_its_guards():
    # 4 of 1,000 0/1 docs differ, one doc per cluster: CR2 gave * p 0.045; McNemar says 0.125.
    a = [0.0] * 1000
    b = [1.0] * 4 + [0.0] * 996
    r = paired_mean(a, b, clusters=[f"p{i}" for i in range(1000)])
    assert r.p_value == pytest.approx(0.125) and r.test == "McNemar exact"
    assert r.clusters == 1000 and r.ci_low < 0 < r.ci_high
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 10, 5)
    y = x + rng.lognormal(0, 1.5, 5)
    skewed = paired_mean(x.tolist(), y.tolist(), clusters=list(range(5)))
    assert skewed.test == "sign-flip exact" and skewed.p_value == pytest.approx(0.0625)
    assert math.isnan(skewed.ci_low) and skewed.note


def test_few_clusters_with_differences_are_decided_by_the_sign_flip_test_and_marked():
    a = [0.0] * 1000
    b = [1.0 if i in (0, 10, 20, 30) else 0.0 for i in range(1000)]  # 4 clusters of 10 differ
    r = paired_mean(a, b, clusters=[i // 10 for i in range(1000)])
    assert r.test == "sign-flip exact" and r.p_value == pytest.approx(0.125)
    assert r.note is not None and "4 of the 100 clusters" in r.note


@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.95, 0.99])
@pytest.mark.parametrize("n", [1, 3, 4, 5, 6, 8])
def test_exact_bound_of_all_alike_docs_holds_zero_exactly_when_the_test_does_not_reject(
    n, confidence
):
    # 5 docs all +1: the bound was one-sided, [+0.0986, +1] beside p 0.0625 and no `*`.
    r = paired_mean([0.0] * n, [1.0] * n, confidence=confidence)
    assert r.method.endswith("-exact-bound")
    assert (r.ci_low <= 0) == (r.p_value >= 1 - confidence)
    assert r.ci_low == pytest.approx(2 * ((1 - confidence) / 2) ** (1 / n) - 1)
