"""Clustered standard errors against statsmodels' cluster-robust covariance."""

from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats

from assay.stats.clustered import (
    cluster_count,
    cluster_degrees_of_freedom,
    clustered_stderr,
    clustered_variance_of_mean,
    cr2_variance_of_mean,
)
from assay.stats.paired import paired_mean


def _statsmodels_cluster_variance(values: np.ndarray, groups: np.ndarray) -> float:
    """Var of the mean from an intercept-only regression with cluster-robust errors and no
    small-sample correction: Σ_c (Σ_{i∈c} e_i)² / n²."""
    fit = sm.OLS(values, np.ones(len(values))).fit(
        cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False}
    )
    return float(fit.bse[0] ** 2)


def test_matches_the_sandwich_estimator_with_the_diagonal_replaced_by_the_sample_variance():
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(12), rng.integers(1, 6, 12))
    values = rng.normal(size=len(groups)) + rng.normal(size=12)[groups]
    n = len(values)
    residuals = values - values.mean()
    # Miller's eq. 4 = the sandwich form, whose diagonal Σe²/n² is replaced by s²/n.
    expected = (
        _statsmodels_cluster_variance(values, groups)
        - residuals @ residuals / n**2
        + values.var(ddof=1) / n
    )
    assert clustered_variance_of_mean(values.tolist(), groups.tolist()) == pytest.approx(
        expected, rel=1e-12
    )
    assert clustered_stderr(values, groups) == pytest.approx(math.sqrt(expected), rel=1e-12)
    assert cluster_count(groups.tolist()) == 12


def test_one_doc_per_cluster_gives_the_plain_standard_error():
    values = [0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    assert clustered_stderr(values, list(range(7))) == pytest.approx(stats.sem(values), rel=1e-12)


def test_questions_that_share_a_passage_widen_the_interval():
    # Whole passages right or wrong: 6 passages of 5 questions each.
    values = [float(p % 2) for p in range(6) for _ in range(5)]
    passages = [p for p in range(6) for _ in range(5)]
    plain = stats.sem(values)
    clustered = clustered_stderr(values, passages)
    assert clustered > 2 * plain
    # Every deviation is ±1/2: s²/n = (30/29 · 1/4)/30, and the cross-products of each
    # passage add ((5 · 1/2)² - 5 · 1/4) = 5, over 6 passages, / 30².
    assert clustered == pytest.approx(math.sqrt(0.25 / 29 + 6 * 5 / 900), rel=1e-12)


def test_fewer_than_two_values_have_no_standard_error():
    assert math.isnan(clustered_stderr([1.0], ["a"]))
    with pytest.raises(ValueError, match="3 values but 2 cluster labels"):
        clustered_variance_of_mean([1.0, 2.0, 3.0], ["a", "b"])


def test_cr2_is_the_plain_variance_for_singletons_and_scales_cr0_for_equal_clusters():
    rng = np.random.default_rng(4)
    values = rng.normal(size=24)
    assert cr2_variance_of_mean(values, list(range(24))) == pytest.approx(
        float(np.var(values, ddof=1)) / 24, rel=1e-12
    )
    groups = [i // 6 for i in range(24)]  # 4 clusters of 6
    sums = np.bincount(groups, weights=values - values.mean())
    cr0 = float(sums @ sums) / 24**2
    assert cr2_variance_of_mean(values, groups) == pytest.approx(cr0 * 4 / 3, rel=1e-12)
    assert math.isnan(cr2_variance_of_mean(values, [0] * 24))


def _brute_force_bell_mccaffrey(sizes: list[int]) -> float:
    """Bell-McCaffrey's degrees of freedom from the matrices themselves (Imbens-Kolesár eq. 11):
    the columns (I - H)_g A_g 1_g / n with A_g = (I - H_gg)^(-1/2), λ the eigenvalues of GᵀG."""
    labels = np.repeat(np.arange(len(sizes)), sizes)
    n = labels.size
    hat = np.full((n, n), 1.0 / n)
    columns = []
    for g in range(len(sizes)):
        rows = labels == g
        w, v = np.linalg.eigh(np.eye(rows.sum()) - hat[np.ix_(rows, rows)])
        adjust = v @ np.diag(w**-0.5) @ v.T
        columns.append((np.eye(n) - hat)[:, rows] @ adjust @ np.ones(rows.sum()) / n)
    matrix = np.asarray(columns).T
    eigenvalues = np.linalg.eigvalsh(matrix.T @ matrix)
    return float(eigenvalues.sum() ** 2 / (eigenvalues**2).sum())


@pytest.mark.parametrize(
    "sizes", [[5, 5, 5], [20, 20], [200, 5, 5, 5, 5], [100, 100, 2, 2], [50, 10, 10, 10, 10]]
)
def test_bell_mccaffrey_degrees_of_freedom_match_the_matrix_form(sizes):
    labels = np.repeat(np.arange(len(sizes)), sizes).tolist()
    assert cluster_degrees_of_freedom(labels) == pytest.approx(
        _brute_force_bell_mccaffrey(sizes), rel=1e-9
    )
    if len(set(sizes)) == 1:
        assert cluster_degrees_of_freedom(labels) == pytest.approx(len(sizes) - 1, rel=1e-12)
    assert math.isnan(cluster_degrees_of_freedom([0] * 10))


def test_clusters_of_which_a_quarter_carry_the_effect_are_marked_whatever_the_estimate():
    """26 clusters of 20, each shifted by +1 with probability 1/4 (doc sd 0.1): the skew rule
    left the draws with 10 or more shifted clusters unmarked (estimate far above the truth;
    0.84 coverage). The bimodality of the cluster sums marks every draw, however many of the
    clusters are shifted."""
    rng = np.random.default_rng(21)
    labels = np.repeat(np.arange(26), 20)
    shifted_counts = set()
    for _ in range(200):
        effect = rng.choice([0.0, 0.0, 0.0, 1.0], 26)
        d = effect[labels] + rng.normal(0, 0.1, labels.size)
        result = paired_mean(np.zeros_like(d).tolist(), d.tolist(), clusters=labels.tolist())
        assert result.note is not None, int(effect.sum())
        shifted_counts.add(int(effect.sum()))
    assert max(shifted_counts) >= 10  # the draws the old rule left unmarked were among these


def test_normal_cluster_shifts_are_not_marked_as_clumped():
    """Ordinary cluster-level shifts (30 clusters of 20, cluster sd 0.3, doc sd 1) are never
    read as two clumps."""
    rng = np.random.default_rng(22)
    labels = np.repeat(np.arange(30), 20)
    for _ in range(200):
        d = rng.normal(0, 0.3, 30)[labels] + rng.normal(0, 1, labels.size)
        result = paired_mean(np.zeros_like(d).tolist(), d.tolist(), clusters=labels.tolist())
        assert result.note is None or "clumps" not in result.note
