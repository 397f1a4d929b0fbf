"""`assay power`: docs needed, against statsmodels' power solver on the runs' own variance."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
from statsmodels.stats.power import NormalIndPower

from assay.cli.main import main
from assay.stats.binary_power import binary_docs_needed, exact_mde, exact_power
from assay.stats.paired import paired_mean


def _run(folder: Path, values: list[float]) -> Path:
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({"results": {"qa": {"name": "qa"}}}))
    with (folder / "samples_qa.jsonl").open("w") as handle:
        for i, v in enumerate(values):
            record = {
                "doc_id": i,
                "doc_hash": f"h{i}",
                "filter": "none",
                "metrics": ["acc"],
                "acc": v,
            }
            handle.write(json.dumps(record) + "\n")
    return folder


def _needed(variance: float, delta: float) -> int:
    effect = delta / math.sqrt(variance)
    return math.ceil(NormalIndPower().solve_power(effect, alpha=0.05, power=0.8, ratio=0) - 1e-6)


def test_two_runs_give_the_variance_of_their_paired_differences(tmp_path, capsys):
    rng = np.random.default_rng(0)
    a = (rng.uniform(size=200) < 0.6).astype(float)
    b = np.where(rng.uniform(size=200) < 0.7, a, (rng.uniform(size=200) < 0.7)).astype(float)
    paths = [str(_run(tmp_path / n, v.tolist())) for n, v in (("a", a), ("b", b))]
    assert main(["power", *paths, "--difference", "0.03"]) == 0
    out = capsys.readouterr().out
    variance = float(np.var(b - a, ddof=1))
    assert f"variance of the per-doc differences: {variance:.6g}" in out
    # 0/1 scores: planned on the share of docs that differ between the runs, with McNemar's
    # exact power (the test compare runs on them); the MDE is that power's too.
    share = float(np.mean(a != b))
    assert f"planned on discordance {share:.4g} ({share:.4g} of the 200 docs differ" in out
    assert re.search(rf"^  1 +{binary_docs_needed(share - 0.03**2, 0.03)}$", out, re.M)
    assert f"MDE with the current 200 docs (1 sample each): {exact_mde(200, variance):.4g}" in out


def test_accuracy_and_correlation_with_repeats(capsys):
    argv = ["power", "--accuracy", "0.7", "--correlation", "0.5", "--difference", "0.02"]
    assert main([*argv, "--within-variance", "0.05", "--repeats", "1,4"]) == 0
    out = capsys.readouterr().out
    one = 2 * 0.21 * (1 - 0.5)  # Var(b - a) with equal variances p(1-p) and correlation 0.5
    assert re.search(rf"^  1 +{binary_docs_needed(one, 0.02)}$", out, re.M)
    assert re.search(rf"^  4 +{_needed(one - 2 * 0.05 * (1 - 1 / 4), 0.02)}$", out, re.M)


def test_missing_or_impossible_inputs_are_refused(tmp_path, capsys):
    run = str(_run(tmp_path / "a", [0.0, 1.0, 1.0]))
    assert main(["power", run, "--difference", "0.1"]) == 2
    assert "needs --correlation" in capsys.readouterr().err
    assert main(["power", "--difference", "0.1"]) == 2
    assert "needs --accuracy" in capsys.readouterr().err
    argv = ["power", "--accuracy", "0.5", "--correlation", "0.5", "--difference", "0.1"]
    assert main([*argv, "--within-variance", "0.2"]) == 2
    assert "--within-variance 0.2: must lie between 0 and half" in capsys.readouterr().err
    argv = ["power", run, "--correlation", "0.5", "--difference", "0.1", "--metric", "f1"]
    assert main(argv) == 2
    assert "--metric 'f1'" in capsys.readouterr().err


def test_two_runs_without_spread_plan_on_the_exact_bound_not_on_zero(tmp_path, capsys):
    # Both runs score 0 on all 12 docs: the variance is not 0, it is not estimated.
    paths = [str(_run(tmp_path / n, [0.0] * 12)) for n in ("a", "b")]
    assert main(["power", *paths, "--difference", "0.05"]) == 0
    out = capsys.readouterr().out
    share = 1 - 0.05 ** (1 / 12)  # Clopper-Pearson: no differing doc in 12
    assert "not estimable: all 12 per-doc differences are 0 (no spread)" in out
    assert f"in its place: {share:.6g}, an upper bound from the Clopper-Pearson 95% bound" in out
    assert re.search(rf"^  1 +{binary_docs_needed(share, 0.05)}$", out, re.M)
    # The MDE is where McNemar's exact power on 12 docs reaches 80 %: far above the normal
    # formula's on the bound.
    mde = exact_mde(12, share)
    assert f"(1 sample each): {mde:.4g} (from the variance in its place)" in out
    assert mde > (1.959963984540054 + 0.8416212335729143) * math.sqrt(share / 12)
    assert (
        not re.search(r"^  1 +1$", out, re.M)
        and "MDE with the current 12 docs (1 sample each): 0\n" not in out
    )


def test_two_runs_without_spread_take_accuracy_and_correlation_in_its_place(tmp_path, capsys):
    paths = [str(_run(tmp_path / n, [1.0] * 8)) for n in ("a", "b")]
    argv = ["power", *paths, "--difference", "0.1", "--accuracy", "0.9", "--correlation", "0.5"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    variance = 2 * 0.09 * 0.5
    assert f"in its place: {variance:.6g}, accuracy 0.9 for both models, correlation 0.5" in out
    # One 0/1 sample per doc: planned with the power of compare's own test (stats.binary_power).
    # 0.09 + 0.1² is the least discordance a difference of 0.1 allows: "at least".
    assert re.search(rf"^  1 +at least {binary_docs_needed(variance, 0.1)}$", out, re.M)
    assert binary_docs_needed(variance, 0.1) >= _needed(variance, 0.1)


def test_one_run_without_spread_bounds_its_accuracy(tmp_path, capsys):
    run = str(_run(tmp_path / "a", [0.0] * 20))
    assert main(["power", run, "--correlation", "0.5", "--difference", "0.1"]) == 0
    out = capsys.readouterr().out
    edge = 1 - 0.05 ** (1 / 20)
    variance = 2 * edge * (1 - edge) * 0.5
    assert f"in its place: {variance:.6g}, an upper bound from p(1-p)" in out


def test_runs_without_spread_that_no_bound_covers_are_refused(tmp_path, capsys):
    a = str(_run(tmp_path / "a", [0.2] * 6))
    b = str(_run(tmp_path / "b", [0.7] * 6))
    assert main(["power", a, b, "--difference", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "all 6 per-doc differences are 0.5 (no spread)" in err and "--accuracy P" in err
    assert main(["power", a, "--correlation", "0.3", "--difference", "0.1"]) == 2
    assert "all 6 scores of" in capsys.readouterr().err


def test_assumptions_beside_runs_that_measure_the_variance_are_refused(tmp_path, capsys):
    a = str(_run(tmp_path / "a", [0.0, 1.0, 1.0, 0.0]))
    b = str(_run(tmp_path / "b", [1.0, 1.0, 0.0, 0.0]))
    assert main(["power", a, b, "--difference", "0.1", "--correlation", "0.5"]) == 2
    assert "leave --correlation out" in capsys.readouterr().err
    argv = ["power", "--accuracy", "0.5", "--correlation", "1", "--difference", "0.1"]
    assert main(argv) == 2
    assert "no difference to detect" in capsys.readouterr().err


def test_all_wrong_runs_plan_on_the_variance_floor_the_difference_implies(tmp_path, capsys):
    # 1,000 all-wrong docs bound the variance near 0.003, but a true difference of 0.05 between
    # 0/1 scores means 5 % of docs differ: Var(d) >= 0.05 * 0.95, about 150 docs by the normal
    # formula, not 10; McNemar's exact test, which compare runs on so few differing docs, needs
    # 157 for its 80 % power.
    paths = [str(_run(tmp_path / n, [0.0] * 1000)) for n in ("a", "b")]
    assert main(["power", *paths, "--difference", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "planned on discordance 0.05, the least the difference allows" in out
    assert "Var(d) = share - d^2 = 0.0475" in out
    needed = int(re.search(r"^  1 +at least (\d+)$", out, re.M).group(1))  # type: ignore[union-attr]
    assert needed == binary_docs_needed(0.05 * 0.95, 0.05) == 157
    assert exact_power(needed, 0.05 * 0.95, 0.05) >= 0.8 > exact_power(150, 0.05 * 0.95, 0.05)
    assert "McNemar's exact test, computed exactly" in out


def test_differences_equal_up_to_rounding_are_no_spread_not_one_doc(tmp_path, capsys):
    a = [0.2, 0.5, 0.7, 0.1, 0.3]
    b = [0.4, 0.7, 0.9, 0.3, 0.5]  # every difference is 0.2 up to the last bit
    paths = [str(_run(tmp_path / "a", a)), str(_run(tmp_path / "b", b))]
    assert main(["power", *paths, "--difference", "0.05"]) == 2
    err = capsys.readouterr().err
    assert (
        "all 5 per-doc differences equal 0.2 up to rounding (no spread)" in err and "not 0/1" in err
    )


def test_mde_beyond_the_range_of_0_1_scores_is_no_mde(tmp_path, capsys):
    paths = [str(_run(tmp_path / n, [0.0, 1.0])) for n in ("a", "b")]
    assert main(["power", *paths, "--difference", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "MDE with the current 2 docs (1 sample each): none" in out
    assert "no difference of 0/1 scores, up to 1, is detected" in out


def test_a_plan_assumes_a_stated_discordance_and_holds_by_simulation(tmp_path, capsys):
    # Two all-wrong runs, --difference 0.05: the least discordance (0.05) plans "at least 157";
    # with 10 % of docs differing one way and 5 % the other (--discordance 0.15) the plan is
    # larger, and compare's own test, simulated at that n, reaches the power it promises.
    paths = [str(_run(tmp_path / n, [0.0] * 1000)) for n in ("a", "b")]
    argv = ["power", *paths, "--difference", "0.05", "--discordance", "0.15"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "planned on discordance 0.15 (given)" in out and "at least" not in out
    needed = int(re.search(r"^  1 +(\d+)$", out, re.M).group(1))  # type: ignore[union-attr]
    assert needed > 157
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(300):
        u = rng.uniform(size=needed)
        a, b = (u >= 0.90) & (u < 0.95), u < 0.10
        result = paired_mean(a.astype(float).tolist(), b.astype(float).tolist())
        hits += result.p_value < 0.05 and result.diff > 0
    assert hits / 300 >= 0.75  # 0.8 within Monte Carlo error (sd 0.023)
    # At the least-discordance plan the same truth is far below the promised power.
    assert exact_power(157, 0.15 - 0.05**2, 0.05) < 0.45
    assert main([*argv[:-2], "--discordance", "0.01"]) == 2
    assert "--discordance 0.01" in capsys.readouterr().err


def test_a_plan_from_few_docs_carries_a_caveat(tmp_path, capsys):
    a = str(_run(tmp_path / "a", [0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0]))
    b = str(_run(tmp_path / "b", [1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0]))
    assert main(["power", a, b, "--difference", "0.1"]) == 0
    assert "caveat: the variance comes from 10 docs; below 30" in capsys.readouterr().out


def _sign_flip_power(n: int, shift: float, sd: float, reps: int, seed: int) -> float:
    """Achieved power of assay compare's own test (paired_mean) at n docs of values that are
    not 0/1, differences normal(shift, sd): the share of draws it finds the shift."""
    rng = np.random.default_rng(seed)
    found = 0
    for _ in range(reps):
        a = rng.uniform(0, 100, n)
        r = paired_mean(a.tolist(), (a + rng.normal(shift, sd, n)).tolist())
        found += r.p_value < 0.05 and r.diff > 0
    return found / reps


def test_a_plan_for_values_that_are_not_0_1_is_made_with_the_test_compare_runs(tmp_path, capsys):
    # A 0-100 metric and a difference of 20 against sd 9.7: the normal formula plans 2 docs,
    # where compare's sign-flip test cannot reach p < 0.05 at all (power 0 at 2 docs).
    rng = np.random.default_rng(3)
    a = rng.uniform(0, 100, 60)
    b = np.clip(a + rng.normal(3.6, 9.7, 60), 0, 100)
    paths = [str(_run(tmp_path / n, v.tolist())) for n, v in (("a", a), ("b", b))]
    assert main(["power", *paths, "--difference", "20"]) == 0
    out = capsys.readouterr().out
    planned = int(re.search(r"^  1 +(\d+) \(raised\)$", out, re.M).group(1))
    assert planned == 30 and "sign-flip test" in out
    assert _sign_flip_power(2, 20, 9.7, reps=50, seed=1) == 0.0
    assert _sign_flip_power(planned, 20, float(np.std(b - a, ddof=1)), reps=100, seed=1) >= 0.8
    # A difference beyond the range the scores span is refused, naming the flag and value.
    assert main(["power", *paths, "--difference", "500"]) == 2
    err = capsys.readouterr().err
    assert "--difference 500: the runs' scores span" in err and "Traceback" not in err


def test_few_differing_docs_of_other_values_give_no_mde_as_in_compare(tmp_path, capsys):
    # 4 of 1000 docs differ, by values that are not 0/1: compare shows no MDE (n/a†).
    a = np.zeros(1000)
    b = a.copy()
    b[:4] = [0.9, 0.95, 0.97, 0.99]
    paths = [str(_run(tmp_path / n, v.tolist())) for n, v in (("a", a), ("b", b))]
    assert math.isnan(paired_mean(a.tolist(), b.tolist()).mde)
    assert main(["power", *paths, "--difference", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "MDE with the current 1000 docs (1 sample each): none: only 4 of the 1000" in out
    # The plan reaches 25 differing docs at the runs' share of 4 in 1000.
    assert re.search(r"^  1 +6250 \(raised\)$", out, re.M)


def test_values_that_overflow_and_impossible_correlations_are_refused(tmp_path, capsys):
    a = str(_run(tmp_path / "a", [1e300 * i for i in range(40)]))
    b = str(_run(tmp_path / "b", [-1e300 * (i % 7) for i in range(40)]))
    assert main(["power", a, b, "--difference", "0.1"]) == 2
    assert "too large for floating point" in capsys.readouterr().err
    # Two models of accuracy 0.7 cannot correlate below -0.3/0.7 on 0/1 scores.
    argv = ["power", "--accuracy", "0.7", "--difference", "0.05", "--correlation"]
    assert main([*argv, "-1"]) == 2
    assert "--correlation -1: two models of the same accuracy 0.7" in capsys.readouterr().err
    assert main([*argv, "-0.4"]) == 0
    capsys.readouterr()
    assert main(["power", "--accuracy", "0.5", "--difference", "0.05", "--correlation", "-1"]) == 0


def test_one_run_of_fewer_docs_than_compare_estimates_from_shows_no_mde(tmp_path, capsys):
    # 5 docs not 0/1: at most 5 could differ, and compare shows no MDE below 25 (it printed 0.135).
    run = str(_run(tmp_path / "a", [0.2, 0.5, 0.7, 0.1, 0.3]))
    assert main(["power", run, "--correlation", "0.9", "--difference", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "MDE with the current 5 docs (1 sample each): none: only 5 of the 5 docs could" in out
    many = str(_run(tmp_path / "b", [0.1 * (i % 7) for i in range(40)]))
    assert main(["power", many, "--correlation", "0.9", "--difference", "0.01"]) == 0
    assert re.search(
        r"MDE with the current 40 docs \(1 sample each\): [0-9.]+\n", capsys.readouterr().out
    )


def _clustered_run(folder: Path, values: np.ndarray, size: int) -> Path:
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({"results": {"qa": {"name": "qa"}}}))
    with (folder / "samples_qa.jsonl").open("w") as handle:
        for i, v in enumerate(values.tolist()):
            doc = {"passage": i // size}
            record = {"doc_id": i, "doc_hash": f"h{i}", "doc": doc, "filter": "none"}
            handle.write(json.dumps({**record, "metrics": ["acc"], "acc": v}) + "\n")
    return folder


def _clustered_draw(rng, clusters: int, size: int, delta: float) -> tuple[np.ndarray, ...]:
    """Runs whose difference shifts by passage (sd 0.3) on top of doc noise (sd 0.5)."""
    a = rng.normal(0, 1, clusters * size)
    shift = rng.normal(0, 0.3, clusters).repeat(size)
    return a, a + delta + shift + rng.normal(0, 0.5, clusters * size)


def test_clustered_runs_are_planned_in_clusters_with_compares_clustered_test(tmp_path, capsys):
    # 30 passages of 10 docs: the plan on the docs' variance alone is for a test compare does
    # not run here (its power at that plan was 0.25 on passage-shifted differences); the plan
    # in clusters is checked by compare's own clustered test at the planned size.
    rng = np.random.default_rng(3)
    a, b = _clustered_draw(rng, 30, 10, 0.3)
    paths = [str(_clustered_run(tmp_path / n, v, 10)) for n, v in (("a", a), ("b", b))]
    assert main(["power", *paths, "--difference", "0.3", "--cluster-by", "passage"]) == 0
    out = capsys.readouterr().out
    assert "clustered by 'passage': 30 clusters" in out
    planned = int(re.search(r"^  (\d+) clusters \((\d+) docs", out, re.M).group(1))
    hits = 0
    for _ in range(200):
        a, b = _clustered_draw(rng, planned, 10, 0.3)
        labels = np.arange(planned).repeat(10).tolist()
        hits += paired_mean(a, b, clusters=labels).p_value < 0.05
    assert hits / 200 >= 0.70, (planned, hits / 200)
    unclustered = main(["power", *paths, "--difference", "0.3"])
    assert unclustered == 0 and "clusters needed" not in capsys.readouterr().out


def test_a_cluster_field_the_docs_lack_is_refused_by_name(tmp_path, capsys):
    rng = np.random.default_rng(0)
    a, b = _clustered_draw(rng, 5, 4, 0.3)
    paths = [str(_clustered_run(tmp_path / n, v, 4)) for n, v in (("a", a), ("b", b))]
    assert main(["power", *paths, "--difference", "0.3", "--cluster-by", "story"]) == 2
    err = capsys.readouterr().err
    assert "'story'" in err and "doc 0 has no such field" in err and "Traceback" not in err
    argv = ["power", "--accuracy", "0.5", "--correlation", "0.5", "--difference", "0.1"]
    assert main([*argv, "--cluster-by", "passage"]) == 2
    assert "--cluster-by: reads the clusters of the runs' docs" in capsys.readouterr().err


def test_plans_and_mdes_past_the_ceiling_are_refused_or_marked(tmp_path, capsys):
    # Planned "at least 157" docs for a model B at accuracy 1.03, and showed an MDE of 0.0079
    # from a run at 0.995 (an improvement to 1.003) unmarked.
    argv = ["power", "--accuracy", "0.98", "--correlation", "0.9", "--difference", "0.05"]
    assert main(argv) == 2
    assert "plans for a model at 1.03, beyond the possible 0-1" in capsys.readouterr().err
    run = str(_run(tmp_path / "a", [1.0] * 995 + [0.0] * 5))
    assert main(["power", run, "--correlation", "0.5", "--difference", "0.05"]) == 2
    assert "give a difference between -0.995 and 0.005" in capsys.readouterr().err
    assert main(["power", run, "--correlation", "0.5", "--difference", "-0.05"]) == 0
    out = capsys.readouterr().out
    assert "†: an improvement that large from the run's accuracy 0.995 passes 1" in out
    assert "the MDE holds for a drop only" in out


def test_clustered_runs_without_spread_plan_on_the_floor_not_a_traceback(tmp_path, capsys):
    # Two identical 0/1 runs in 4 clusters of 10: compare's clustered stderr is not estimated;
    # the plan stands on d(1-d) per cluster (was a ValueError traceback).
    values = np.array([1.0, 0.0] * 20)
    paths = [str(_clustered_run(tmp_path / n, values, 10)) for n in ("a", "b")]
    assert main(["power", *paths, "--difference", "0.1", "--cluster-by", "passage"]) == 0
    out = capsys.readouterr().out
    assert "not estimable (no spread)" in out and "at least 10 clusters (100 docs" in out
    assert "caveat: the variance comes from 4 clusters" in out
