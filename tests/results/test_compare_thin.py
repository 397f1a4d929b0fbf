"""`assay compare` on thin data: the five cases of issue 38 (few clusters, few differing docs,
values that are not finite, tiny corpus bootstraps, rows Holm leaves out)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats
from test_compare import write_run

from assay.cli.main import main
from assay.results.compare import CompareOptions, compare_runs
from assay.results.compare_table import notes, render_text
from assay.results.readers import read_run


def _compare(tmp_path, a, b, metric="acc", options=None, **kw):
    run_a = write_run(tmp_path / "a", {"t": {metric: a}}, **kw)
    run_b = write_run(tmp_path / "b", {"t": {metric: b}}, **kw)
    return compare_runs([read_run(run_a), read_run(run_b)], options=options)


def test_two_clusters_are_read_against_t_with_one_degree_of_freedom(tmp_path):
    # Two passages of 10 docs; run b is better on both by different amounts.
    passages = [p for p in range(2) for _ in range(10)]
    rows = [{"question": f"q{i}", "passage": f"p{p}"} for i, p in enumerate(passages)]
    rng = np.random.default_rng(3)
    a = (rng.uniform(size=20) < 0.3).astype(float).tolist()
    b = [1.0 if p == 0 else x for x, p in zip(a, passages)]
    b[15] = 1.0
    kw = {"docs": {"t": rows}, "cluster_keys": {"t": "passage"}}
    row = _compare(tmp_path, a, b, **kw).comparisons[0]
    assert row.clusters == 2 and row.method == "paired-clustered"
    t1 = stats.t.ppf(0.975, 1)  # 12.7, not the normal's 1.96
    # The t(1) interval reaches past [-1, 1], where no difference of 0/1 scores lies: cut there.
    assert (row.ci_low, row.ci_high) == (
        max(-1.0, row.diff - t1 * row.stderr),
        min(1.0, row.diff + t1 * row.stderr),
    )
    assert row.ci_low == -1.0 or row.ci_high == 1.0
    assert "is cut there" in (row.note or "")
    # Two clusters whose sums differ: the p-value is the exact sign-flip test over them (0.5).
    assert row.test == "sign-flip exact" and row.p_value == pytest.approx(0.5)
    assert "only 2 of the 2 clusters" in (row.note or "")
    assert row.ci_low < 0 < row.ci_high and not row.significant()


def test_four_of_a_thousand_docs_differing_are_not_significant(tmp_path):
    a = [0.0] * 1000
    b = [0.0] * 996 + [1.0] * 4
    row = _compare(tmp_path, a, b).comparisons[0]
    # The row's p-value is McNemar's exact test, the `*` and the interval follow it.
    assert row.method == "paired-exact"
    assert row.p_value == pytest.approx(0.125) and row.mcnemar_p == pytest.approx(0.125)
    assert row.ci_low < 0 < row.ci_high and not row.significant()
    text = render_text(_compare(tmp_path / "again", a, b))
    assert not text.splitlines()[2].startswith("*")


def test_one_differing_doc_is_wider_than_the_bound_when_none_differ(tmp_path):
    none = _compare(tmp_path / "none", [0.0] * 1000, [0.0] * 1000).comparisons[0]
    one = _compare(tmp_path / "one", [0.0] * 1000, [0.0] * 999 + [1.0]).comparisons[0]
    assert one.ci_high - one.ci_low > none.ci_high - none.ci_low
    assert one.ci_low < 0 < one.ci_high


def test_eight_one_sided_differing_docs_agree_with_mcnemar(tmp_path):
    row = _compare(tmp_path, [0.0] * 1000, [0.0] * 992 + [1.0] * 8).comparisons[0]
    assert row.p_value == pytest.approx(2 * 0.5**8) and row.significant()
    assert row.ci_low > 0


def test_an_infinite_value_gives_strict_json_and_a_true_note(tmp_path):
    a = [1.0, 2.0, 3.0, 4.0, 5.0]
    b = [1.5, 2.0, math.inf, 4.5, 5.0]
    run_a = write_run(tmp_path / "a", {"t": {"acc_norm": a}})
    run_b = write_run(tmp_path / "b", {"t": {"acc_norm": b}})
    out = tmp_path / "c.json"
    assert main(["compare", str(run_a), str(run_b), "--json", str(out)]) == 0
    text = out.read_text()
    assert "Infinity" not in text and "NaN" not in text
    [row] = json.loads(text, parse_constant=lambda c: pytest.fail(c))["comparisons"]
    assert row["mean_b"] is None and row["diff"] is None and row["stderr"] is None
    assert "1 of the 5 docs hold a value that is not a finite number (inf)" in row["note"]
    assert "mean_b is inf (null here)" in row["note"]
    assert "all 5 per-doc differences" not in row["note"]


def test_mde_never_exceeds_the_range_of_0_1_scores(tmp_path):
    row = _compare(tmp_path, [0.0, 1.0], [1.0, 1.0]).comparisons[0]
    assert row.mde is None or math.isnan(row.mde)
    assert "the largest difference of 0/1 scores" in (row.note or "")


def _f1(pairs):
    from sklearn.metrics import f1_score

    return f1_score([p[0] for p in pairs], [p[1] for p in pairs])


def test_a_three_doc_corpus_bootstrap_is_marked_and_its_warnings_summarised(tmp_path, recwarn):
    a = [[1, 0], [0, 0], [1, 1]]
    b = [[1, 1], [0, 0], [1, 1]]
    run_a = write_run(tmp_path / "a", {"t": {"f1": a}})
    run_b = write_run(tmp_path / "b", {"t": {"f1": b}})
    options = CompareOptions(bootstrap_iters=200)
    row = compare_runs([read_run(run_a), read_run(run_b)], options=options).comparisons[0]
    assert row.method == "paired-bootstrap"
    assert "bootstrap over 3 docs: below 30" in (row.note or "")
    assert "the aggregation warned" in (row.note or "")
    assert "UndefinedMetricWarning" in (row.note or "")
    assert not [w for w in recwarn if "Precision" in str(w.message) or "F-score" in str(w.message)]


def test_a_corpus_bootstrap_without_positives_summarises_every_warning(tmp_path, recwarn):
    # No positive anywhere: f1 warns on the full runs too (the difference of the runs' own
    # f1 warned outside the summary), not only on the resamples.
    run_a = write_run(tmp_path / "a", {"t": {"f1": [[0, 0]] * 3}})
    run_b = write_run(tmp_path / "b", {"t": {"f1": [[0, 0]] * 3}})
    options = CompareOptions(bootstrap_iters=50)
    row = compare_runs([read_run(run_a), read_run(run_b)], options=options).comparisons[0]
    assert "the aggregation warned 102 time(s)" in (row.note or "")
    assert not [w for w in recwarn if "F-score" in str(w.message)]


def test_a_0_1_row_whose_mde_exceeds_1_keeps_its_interval_unmarked(tmp_path):
    # Two docs that differ both ways: the exact interval stands; only the MDE has no value.
    report = _compare(tmp_path, [0.0, 1.0], [1.0, 0.0])
    line = render_text(report).splitlines()[2]
    assert "[-0.9748, +0.9748] " in line and "[-0.9748, +0.9748]†" not in line
    assert "n/a†" in line and "MDE: none below 1" in (report.comparisons[0].note or "")


def test_the_holm_footer_counts_only_the_comparisons_holm_included(tmp_path):
    # acc: a p-value; acc_norm: all differences 0.2 (not 0/1), no p-value, left out of Holm.
    a = {"acc": [0.0, 1.0, 0.0, 1.0], "acc_norm": [0.2, 0.5, 0.7, 0.1]}
    b = {"acc": [1.0, 1.0, 0.0, 0.0], "acc_norm": [0.4, 0.7, 0.9, 0.3]}
    run_a = write_run(tmp_path / "a", {"t": a})
    run_b = write_run(tmp_path / "b", {"t": b})
    report = compare_runs([read_run(run_a), read_run(run_b)])
    assert len(report.comparisons) == 2
    assert (
        "over the 1 comparisons with a p-value above (1 without one left out of Holm)"
        in (notes(report)[0])
    )


def test_few_differing_docs_of_a_bounded_metric_are_decided_by_the_sign_flip_test(tmp_path):
    # 4 of 1,000 docs differ (0.001 -> 0.999): the normal test said p 0.045 and `*`; the exact
    # sign-flip test over the 4 differing docs says 2/16, and no optimistic interval is shown.
    a = [0.001] * 1000
    b = [0.999] * 4 + [0.001] * 996
    row = _compare(tmp_path, a, b, metric="acc").comparisons[0]
    assert row.p_value == pytest.approx(2 / 16) and not row.significant()
    assert row.test == "sign-flip exact"
    assert math.isnan(row.ci_low) and math.isnan(row.mde)
    assert "only 4 of the 1000 docs differ" in (row.note or "")


def test_one_nan_per_doc_value_is_a_row_with_the_reason_not_a_skip(tmp_path):
    a = [0.1, 0.2, 0.3, 0.4, 0.5]
    b = [0.1, 0.2, 0.3, 0.4, float("nan")]
    report = _compare(tmp_path, a, b, metric="acc")
    [row] = report.comparisons
    assert row.p_value is None or math.isnan(row.p_value)
    assert "1 of the 5 docs hold a value that is not a finite number (nan)" in (row.note or "")
    assert "n/a†" in render_text(report)


def test_differences_within_rounding_are_quoted_as_such(tmp_path):
    a = [0.5] * 40
    b = [0.5] * 39 + [0.5 + 1e-15]
    row = _compare(tmp_path, a, b, metric="acc").comparisons[0]
    note = row.note or ""
    assert "are within rounding of 0 (|d| <= 5e-13)" in note and "e-17" not in note
    assert row.p_value == 1.0


def test_no_variance_bound_of_a_0_1_difference_exceeds_1(tmp_path):
    # Every doc differs by +1 on 2 docs: the bound on the share that could differ is 0.78, and
    # (1 - (-1))² · 0.78 = 3.1 would be impossible for a variable in [-1, 1].
    row = _compare(tmp_path, [0.0, 0.0], [1.0, 1.0]).comparisons[0]
    bounds = [float(x) for x in __import__("re").findall(r"variance bound ([\d.]+)", row.note)]
    assert bounds and all(v <= 1 for v in bounds)


@pytest.mark.parametrize("scale", [1e-13, 1e-9])
def test_tiny_values_are_compared_at_their_own_scale_and_shown_in_significant_digits(
    tmp_path, scale
):
    # B = 3A with values near 1e-13 read as "within rounding"; near 1e-9 the row showed
    # +0.0000 [+0.0000, +0.0000] MDE 0.0000 beside a `*`.
    rng = np.random.default_rng(4)
    a = (rng.uniform(0.5, 1.5, 60) * scale).tolist()
    b = [3 * x for x in a]
    report = _compare(tmp_path, a, b)
    row = report.comparisons[0]
    assert row.note is None and row.ci_low > 0 and row.significant()
    line = render_text(report).splitlines()[2]
    assert "0.0000" not in line and f"[+{row.ci_low:.4g}, +{row.ci_high:.4g}]" in line


def test_huge_means_are_shown_compactly(tmp_path):
    text = render_text(_compare(tmp_path, [1e300, 2.0, 3.0], [6e299, 2.0, 3.0]))
    assert "3.333e+299" in text and "2e+299" in text and max(map(len, text.split())) < 40


def test_runs_with_no_metric_in_common_are_refused_with_the_reason(tmp_path, capsys):
    # Printed an empty table and exited 0.
    run_a = write_run(tmp_path / "a", {"t": {"acc": [1.0, 0.0]}})
    run_b = write_run(tmp_path / "b", {"t": {"f1_like": [0.5, 0.2]}})
    assert main(["compare", str(run_a), str(run_b)]) == 2
    assert "share no task, metric and filter" in capsys.readouterr().err


def test_one_null_per_doc_value_is_named_not_reported_as_no_shared_task(tmp_path, capsys):
    # Said "the runs share no task, metric and filter", which was not true.
    run_a = write_run(tmp_path / "a", {"t": {"acc": [1.0, 0.0, None, 1.0]}})
    run_b = write_run(tmp_path / "b", {"t": {"acc": [1.0, 1.0, 0.0, 1.0]}})
    assert main(["compare", str(run_a), str(run_b)]) == 2
    err = capsys.readouterr().err
    assert "share no task" not in err and "Traceback" not in err
    assert "t acc,none: 1 per-doc value(s) are not numbers; the first: doc 2 of run a" in err
    assert "holds None" in err and "(field 'acc')" in err
