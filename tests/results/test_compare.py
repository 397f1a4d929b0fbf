"""`assay compare` on constructed runs and on lm-eval's own run folders; every statistic is
checked against an independent computation (scipy, statsmodels, scikit-learn, or the formula
written out here)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import f1_score
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from assay.cli.main import main
from assay.errors import ResultsError
from assay.results.compare import CompareOptions, compare_runs
from assay.results.compare_table import render_markdown, render_text
from assay.results.readers import read_run
from assay.stats.binary_power import exact_mde
from assay.stats.exact import paired_binary_exact

RUNS = Path(__file__).resolve().parents[1] / "data" / "lm_eval_runs"
FIELDS = [
    "task", "metric", "filter", "a", "b", "n", "mean_a", "mean_b", "diff", "stderr", "ci_low",
    "ci_high", "confidence", "p_value", "p_value_holm", "mcnemar_p", "mde", "clusters", "method",
    "test",
]  # fmt: skip
Z95 = stats.norm.ppf(0.975)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write_run(
    folder: Path,
    tasks: dict[str, dict[str, list[float]]],
    *,
    docs: dict[str, list[dict[str, Any]]] | None = None,
    prompts: dict[str, list[str]] | None = None,
    cluster_keys: dict[str, str] | None = None,
    groups: dict[str, list[str]] | None = None,
    group_weighted: bool = True,
    doc_ids: dict[str, list[int]] | None = None,
) -> Path:
    """An assay run folder: per task, per metric, the per-doc values (filter "none")."""
    folder.mkdir(parents=True)
    results: dict[str, Any] = {"results": {}, "configs": {}, "group_subtasks": {}, "groups": {}}
    for task, metrics in tasks.items():
        n = len(next(iter(metrics.values())))
        rows = (docs or {}).get(task) or [{"question": f"{task} q{i}"} for i in range(n)]
        texts = (prompts or {}).get(task) or [f"Q: {r['question']}\nA:" for r in rows]
        ids = (doc_ids or {}).get(task) or list(range(n))
        with (folder / f"samples_{task}.jsonl").open("w") as handle:
            for k, doc_id in enumerate(ids):
                record = {
                    "doc_id": doc_id,
                    "doc": rows[k],
                    "target": "0",
                    "arguments": {"gen_args_0": {"arg_0": texts[k], "arg_1": " yes"}},
                    "filter": "none",
                    "metrics": list(metrics),
                    "doc_hash": _sha(json.dumps(rows[k], indent=2, ensure_ascii=False)),
                    "prompt_hash": _sha(texts[k]),
                    "target_hash": _sha("0"),
                    **{m: v[k] for m, v in metrics.items()},
                }
                handle.write(json.dumps(record) + "\n")
        entry: dict[str, Any] = {"name": task, "alias": task, "sample_len": n}
        for m, v in metrics.items():
            if all(isinstance(x, float) for x in v):  # corpus-level values: no mean to record
                entry[f"{m},none"] = float(np.mean(v))
                entry[f"{m}_stderr,none"] = float(stats.sem(v))
        results["results"][task] = entry
        metadata = {"version": 1}
        if cluster_keys and task in cluster_keys:
            metadata["cluster_key"] = cluster_keys[task]
        results["configs"][task] = {
            "task": task,
            "metric_list": [{"metric": m} for m in metrics],
            "metadata": metadata,
        }
    for group, members in (groups or {}).items():
        values = [results["results"][t]["acc,none"] for t in members]
        sizes = [results["results"][t]["sample_len"] for t in members]
        value = (
            float(np.average(values, weights=sizes)) if group_weighted else float(np.mean(values))
        )
        entry = {"name": group, "alias": group, "sample_len": sum(sizes), "acc,none": value}
        results["groups"][group] = entry
        results["results"][group] = entry
        results["group_subtasks"][group] = members
    (folder / "results.json").write_text(json.dumps(results))
    return folder


def _binary(n: int, p: float, seed: int, base: np.ndarray | None = None) -> list[float]:
    rng = np.random.default_rng(seed)
    draws = rng.uniform(size=n) < p
    if base is not None:  # correlated with the base run: keep most of its answers
        keep = rng.uniform(size=n) < 0.7
        draws = np.where(keep, base.astype(bool), draws)
    return draws.astype(float).tolist()


@pytest.fixture
def two_runs(tmp_path):
    a = _binary(300, 0.6, 1)
    b = _binary(300, 0.7, 2, base=np.asarray(a))
    run_a = write_run(tmp_path / "model_a", {"qa": {"acc": a}})
    run_b = write_run(tmp_path / "model_b", {"qa": {"acc": b}})
    return run_a, run_b, a, b


def test_every_field_of_a_mean_metric_against_closed_forms(two_runs):
    run_a, run_b, a, b = two_runs
    report = compare_runs([read_run(run_a), read_run(run_b)])
    [row] = report.as_json()["comparisons"]
    assert list(row) == FIELDS
    d = np.asarray(b) - np.asarray(a)
    se = stats.sem(d)
    assert row["task"] == "qa" and row["metric"] == "acc" and row["filter"] == "none"
    assert (row["a"], row["b"], row["n"]) == ("model_a", "model_b", 300)
    assert row["mean_a"] == pytest.approx(np.mean(a)) and row["mean_b"] == pytest.approx(np.mean(b))
    assert row["diff"] == pytest.approx(d.mean())
    assert row["stderr"] == pytest.approx(se, rel=1e-12)
    # 0/1 scores: the exact interval that inverts McNemar's exact test, whose p-value is the
    # row's (and decides its `*`), whatever the count of differing docs.
    only_a, only_b = int((d < 0).sum()), int((d > 0).sum())
    exact = paired_binary_exact(only_a, only_b, 300, 0.95)
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(exact.low), pytest.approx(exact.high))
    assert row["confidence"] == 0.95
    a_, b_ = np.asarray(a, bool), np.asarray(b, bool)
    table = [[(a_ & b_).sum(), (a_ & ~b_).sum()], [(~a_ & b_).sum(), (~a_ & ~b_).sum()]]
    assert row["mcnemar_p"] == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-12)
    assert row["p_value"] == pytest.approx(row["mcnemar_p"])
    # One comparison: Holm leaves it as it is.
    assert row["p_value_holm"] == pytest.approx(row["p_value"])
    assert row["mde"] == pytest.approx(exact_mde(300, float(d.var(ddof=1))))
    assert row["clusters"] is None and row["method"] == "paired-exact"
    assert row["test"] == "McNemar exact"


def test_confidence_changes_the_interval_and_the_significance_mark(two_runs):
    run_a, run_b, *_ = two_runs
    report = compare_runs(
        [read_run(run_a), read_run(run_b)], options=CompareOptions(confidence=0.99)
    )
    row = report.comparisons[0]
    at_95 = compare_runs([read_run(run_a), read_run(run_b)])
    wide = at_95.comparisons[0]
    assert row.ci_high - row.ci_low > wide.ci_high - wide.ci_low
    # McNemar's p is about 0.014 on these runs: significant at 95 %, not at 99 %.
    assert 0.01 < row.p_value < 0.05 and not row.significant()
    [line] = [x for x in render_text(report).splitlines() if " acc " in x]
    assert not line.startswith("*")
    [line] = [x for x in render_text(at_95).splitlines() if " acc " in x]
    assert at_95.comparisons[0].significant() and line.startswith("*")


def test_identical_runs(tmp_path):
    values = _binary(50, 0.5, 3)
    a = write_run(tmp_path / "a", {"qa": {"acc": values}})
    b = write_run(tmp_path / "b", {"qa": {"acc": values}})
    report = compare_runs([read_run(a), read_run(b)])
    row = report.comparisons[0]
    assert row.diff == 0 and math.isnan(row.stderr)  # no spread: not an estimate of 0
    assert row.p_value == 1.0 and row.p_value_holm == 1.0 and row.mcnemar_p == 1.0
    assert not row.significant()
    # The interval is the exact bound on the share of docs that differ, marked and explained.
    share = 1 - 0.05 ** (1 / 50)
    assert (row.ci_low, row.ci_high) == pytest.approx((-share, share))
    as_json = report.as_json()["comparisons"][0]
    assert as_json["stderr"] is None and "Clopper-Pearson" in as_json["note"]
    text = render_text(report)
    assert f"[{-share:+.4f}, {share:+.4f}]†" in text and "[+0.0000, +0.0000]" not in text
    assert "† qa acc,none (a -> b): all 50 per-doc differences are 0" in text


def test_rows_estimated_carry_no_note(tmp_path):
    a = write_run(tmp_path / "a", {"qa": {"acc": _binary(60, 0.5, 1)}})
    b = write_run(tmp_path / "b", {"qa": {"acc": _binary(60, 0.6, 2)}})
    report = compare_runs([read_run(a), read_run(b)])
    assert "note" not in report.as_json()["comparisons"][0]
    assert "†" not in render_text(report)


def _cr2(d: np.ndarray, clusters: list[Any]) -> float:
    """CR2 by its matrix definition: V = (1/n²) Σ_g 1ᵀ(I - H_gg)^(-1/2) e_g e_gᵀ (...)1 with
    H_gg = J/n, computed with numpy's eigendecomposition (not the closed form assay uses)."""
    n = len(d)
    e = d - d.mean()
    total = 0.0
    for label in dict.fromkeys(clusters):
        rows = [i for i in range(n) if clusters[i] == label]
        size = len(rows)
        values, vectors = np.linalg.eigh(np.eye(size) - np.ones((size, size)) / n)
        adjust = vectors @ np.diag(values**-0.5) @ vectors.T
        total += float(np.ones(size) @ adjust @ e[rows]) ** 2
    return math.sqrt(total / n**2)


def test_docs_sharing_a_passage_widen_the_interval(tmp_path):
    # 20 passages of 5 questions: run b gets whole passages right or wrong together.
    passages = [p for p in range(20) for _ in range(5)]
    rows = [{"question": f"q{i}", "passage": f"p{p}"} for i, p in enumerate(passages)]
    rng = np.random.default_rng(0)
    passage_good = rng.uniform(size=20) < 0.5
    a = [0.0] * 100
    b = [float(passage_good[p]) for p in passages]
    kw = {"docs": {"rc": rows}, "cluster_keys": {"rc": "passage"}}
    run_a = write_run(tmp_path / "a", {"rc": {"acc": a}}, **kw)
    run_b = write_run(tmp_path / "b", {"rc": {"acc": b}}, **kw)
    row = compare_runs([read_run(run_a), read_run(run_b)]).comparisons[0]
    d = np.asarray(b) - np.asarray(a)
    assert row.method == "paired-clustered" and row.clusters == 20
    assert row.stderr == pytest.approx(_cr2(d, passages), rel=1e-12)
    assert row.stderr > 2 * stats.sem(d)
    # Read against t(G - 1), wider than the normal's 1.96 with 20 clusters.
    assert row.ci_high - row.ci_low == pytest.approx(2 * stats.t.ppf(0.975, 19) * row.stderr)
    # --cluster-by FIELD chooses the field for every task (here: each doc alone).
    alone = compare_runs(
        [read_run(run_a), read_run(run_b)],
        options=CompareOptions(cluster_by={"*": "question"}),
    ).comparisons[0]
    assert alone.clusters == 100 and alone.stderr == pytest.approx(stats.sem(d), rel=1e-12)


def test_a_cluster_field_missing_from_the_docs_is_refused(two_runs):
    run_a, run_b, *_ = two_runs
    with pytest.raises(ResultsError, match=r"task 'qa': --cluster-by names the doc field 'x'"):
        compare_runs(
            [read_run(run_a), read_run(run_b)], options=CompareOptions(cluster_by={"qa": "x"})
        )


def test_one_changed_prompt_is_refused_unless_allowed_then_flagged(tmp_path):
    values = _binary(10, 0.5, 4)
    texts = [f"Q: qa q{i}\nA:" for i in range(10)]
    changed = [*texts[:6], "Question: qa q6\nAnswer:", *texts[7:]]
    run_a = write_run(tmp_path / "a", {"qa": {"acc": values}}, prompts={"qa": texts})
    run_b = write_run(tmp_path / "b", {"qa": {"acc": values}}, prompts={"qa": changed})
    runs = [read_run(run_a), read_run(run_b)]
    with pytest.raises(
        ResultsError, match=r"task 'qa': .* 1 of 10 paired docs; the first is doc 6"
    ):
        compare_runs(runs)
    report = compare_runs(runs, options=CompareOptions(allow_prompt_mismatch=True))
    assert report.pairs[0].prompt_mismatches == {"qa": (1, 6)}
    assert "PROMPTS DIFFER in qa" in render_text(report)
    assert "PROMPTS DIFFER in qa" in render_markdown(report)
    mismatch = report.as_json()["pairs"][0]["prompt_mismatches"]["qa"]
    assert (mismatch["docs"], mismatch["first_doc"]) == (1, 6)
    assert mismatch["cause"].startswith("nothing the runs recorded explains it")
    assert "cause: nothing the runs recorded explains it" in render_text(report)


def test_different_rows_under_the_same_ids_are_refused_naming_the_fingerprints(tmp_path):
    values = _binary(8, 0.5, 5)
    rows = [{"question": f"qa q{i}"} for i in range(8)]
    other = [*rows[:3], {"question": "another question"}, *rows[4:]]
    run_a = write_run(tmp_path / "a", {"qa": {"acc": values}}, docs={"qa": rows})
    run_b = write_run(tmp_path / "b", {"qa": {"acc": values}}, docs={"qa": other})
    with pytest.raises(
        ResultsError, match=r"dataset fingerprints of their 8 shared doc ids differ"
    ):
        compare_runs([read_run(run_a), read_run(run_b)])


def test_only_docs_in_both_runs_are_paired_and_counted(tmp_path):
    a = _binary(10, 0.5, 6)
    b = _binary(6, 0.5, 7)
    rows = [{"question": f"qa q{i}"} for i in range(10)]
    run_a = write_run(tmp_path / "a", {"qa": {"acc": a}}, docs={"qa": rows})
    run_b = write_run(
        tmp_path / "b",
        {"qa": {"acc": b}},
        docs={"qa": rows[2:8]},
        doc_ids={"qa": list(range(2, 8))},
    )
    report = compare_runs([read_run(run_a), read_run(run_b)])
    row = report.comparisons[0]
    assert row.n == 6
    assert row.diff == pytest.approx(np.mean(b) - np.mean(a[2:8]))
    assert report.pairs[0].paired_docs == {"qa": 6}
    assert report.pairs[0].unpaired_docs == {"qa": (4, 0)}
    assert "qa: 4 doc(s) only in a, 0 only in b" in render_text(report)


def test_holm_runs_over_every_comparison_of_the_invocation(tmp_path):
    base = _binary(200, 0.5, 8)
    folders = [
        write_run(
            tmp_path / f"m{k}",
            {
                "t1": {"acc": _binary(200, 0.5 + 0.05 * k, 10 + k, np.asarray(base))},
                "t2": {"acc": _binary(200, 0.5, 20 + k, np.asarray(base))},
            },
        )
        for k in range(3)
    ]
    report = compare_runs([read_run(f) for f in folders])
    assert [(c.a, c.b) for c in report.comparisons] == [
        ("m0", "m1"), ("m0", "m1"), ("m0", "m2"), ("m0", "m2"), ("m1", "m2"), ("m1", "m2")
    ]  # fmt: skip
    expected = multipletests([c.p_value for c in report.comparisons], method="holm")[1]
    assert [c.p_value_holm for c in report.comparisons] == pytest.approx(list(expected))
    baseline = compare_runs([read_run(f) for f in folders], baseline=read_run(folders[2]))
    assert {(c.a, c.b) for c in baseline.comparisons} == {("m2", "m0"), ("m2", "m1")}


def test_groups_pool_their_tasks_docs(tmp_path):
    a1, a2 = _binary(30, 0.5, 30), _binary(50, 0.5, 31)
    b1, b2 = _binary(30, 0.7, 32, np.asarray(a1)), _binary(50, 0.6, 33, np.asarray(a2))
    kw = {"groups": {"g": ["t1", "t2"]}}
    run_a = write_run(tmp_path / "a", {"t1": {"acc": a1}, "t2": {"acc": a2}}, **kw)
    run_b = write_run(tmp_path / "b", {"t1": {"acc": b1}, "t2": {"acc": b2}}, **kw)
    rows = {c.task: c for c in compare_runs([read_run(run_a), read_run(run_b)]).comparisons}
    pooled = np.asarray(b1 + b2) - np.asarray(a1 + a2)
    group = rows["g"]
    assert group.n == 80
    # The size-weighted difference is the mean of the pooled per-doc differences.
    weighted = (30 * rows["t1"].diff + 50 * rows["t2"].diff) / 80
    assert group.diff == pytest.approx(weighted) == pytest.approx(pooled.mean())
    assert group.stderr == pytest.approx(stats.sem(pooled), rel=1e-12)
    # Fewer than 25 of the 80 docs differ: the exact interval and McNemar's exact test.
    assert group.method == ("paired-exact" if (pooled != 0).sum() < 25 else "paired")


def test_an_unweighted_group_averages_its_tasks(tmp_path):
    a1, a2 = _binary(30, 0.5, 40), _binary(60, 0.5, 41)
    b1, b2 = _binary(30, 0.8, 42), _binary(60, 0.5, 43)
    kw = {"groups": {"g": ["t1", "t2"]}, "group_weighted": False}
    run_a = write_run(tmp_path / "a", {"t1": {"acc": a1}, "t2": {"acc": a2}}, **kw)
    run_b = write_run(tmp_path / "b", {"t1": {"acc": b1}, "t2": {"acc": b2}}, **kw)
    rows = {c.task: c for c in compare_runs([read_run(run_a), read_run(run_b)]).comparisons}
    se1 = stats.sem(np.asarray(b1) - np.asarray(a1))
    se2 = stats.sem(np.asarray(b2) - np.asarray(a2))
    group = rows["g"]
    assert group.diff == pytest.approx((rows["t1"].diff + rows["t2"].diff) / 2)
    assert group.stderr == pytest.approx(math.hypot(se1, se2) / 2, rel=1e-12)
    assert group.method == "paired-unweighted"


def test_corpus_level_metric_by_paired_bootstrap(tmp_path):
    rng = np.random.default_rng(50)
    golds = rng.integers(0, 2, 80).tolist()
    pa = [[g, g if rng.uniform() < 0.6 else 1 - g] for g in golds]
    pb = [[g, g if rng.uniform() < 0.8 else 1 - g] for g in golds]
    run_a = write_run(tmp_path / "a", {"cls": {"f1": pa}})
    run_b = write_run(tmp_path / "b", {"cls": {"f1": pb}})
    options = CompareOptions(bootstrap_iters=200, seed=5)
    row = compare_runs([read_run(run_a), read_run(run_b)], options=options).comparisons[0]

    def f1(pairs):
        return f1_score([p[0] for p in pairs], [p[1] for p in pairs])

    rng2 = np.random.default_rng(5)
    reps = []
    for _ in range(200):
        idx = rng2.integers(0, 80, 80)
        reps.append(f1([pb[i] for i in idx]) - f1([pa[i] for i in idx]))
    assert row.method == "paired-bootstrap" and row.mcnemar_p is None
    assert row.diff == pytest.approx(f1(pb) - f1(pa))
    assert row.stderr == pytest.approx(np.std(reps, ddof=1), rel=1e-12)
    assert row.ci_low == pytest.approx(np.quantile(reps, 0.025))
    assert row.ci_high == pytest.approx(np.quantile(reps, 0.975))
    below, above = sum(r <= 0 for r in reps), sum(r >= 0 for r in reps)
    assert row.p_value == pytest.approx(min(1, 2 * (min(below, above) + 1) / 201))


def _lm_eval_values(seed: int, task: str, metric: str) -> list[Any]:
    [path] = (RUNS / f"dummy_seed{seed}").glob(f"*/samples_{task}_*.jsonl")
    records = sorted(
        (json.loads(x) for x in path.read_text().splitlines()), key=lambda r: r["doc_id"]
    )
    return [r[metric] for r in records]


def test_lm_eval_run_folders_compare_doc_by_doc():
    report = compare_runs(
        [read_run(RUNS / "dummy_seed1"), read_run(RUNS / "dummy_seed2")],
        options=CompareOptions(bootstrap_iters=300),
    )
    rows = {(c.task, c.metric): c for c in report.comparisons}
    assert sorted(rows) == [
        ("fxc", "acc"), ("fxc_passages", "acc"), ("fxc_passages", "acc_norm"),
        ("fxc_yesno", "acc"), ("fxc_yesno", "f1"), ("fxc_yesno", "mcc"),
    ]  # fmt: skip
    # yesno: independent docs, the closed form.
    a = np.asarray(_lm_eval_values(1, "fxc_yesno", "acc"))
    b = np.asarray(_lm_eval_values(2, "fxc_yesno", "acc"))
    assert rows[("fxc_yesno", "acc")].stderr == pytest.approx(stats.sem(b - a), rel=1e-12)
    # passages: lm-eval recorded metadata.cluster_key, so the docs cluster by passage.
    rows_data = [
        json.loads(x) for x in (RUNS / "tasks" / "passages.jsonl").read_text().splitlines()
    ]
    passages = [r["passage_id"] for r in rows_data]
    pa = np.asarray(_lm_eval_values(1, "fxc_passages", "acc"))
    pb = np.asarray(_lm_eval_values(2, "fxc_passages", "acc"))
    row = rows[("fxc_passages", "acc")]
    assert row.clusters == 6 and row.stderr == pytest.approx(_cr2(pb - pa, passages))
    # The group pools both tasks' docs; clusters are the passages and the single yesno docs.
    group = rows[("fxc", "acc")]
    pooled = np.concatenate([pb - pa, b - a])
    labels = passages + [f"yesno{i}" for i in range(16)]
    assert group.n == 34 and group.clusters == 22
    assert group.diff == pytest.approx(pooled.mean())
    assert group.stderr == pytest.approx(_cr2(pooled, labels), rel=1e-12)
    # f1 is lm-eval's corpus-level f1 over (gold, pred) pairs: bootstrapped.
    f1_row = rows[("fxc_yesno", "f1")]
    fa, fb = _lm_eval_values(1, "fxc_yesno", "f1"), _lm_eval_values(2, "fxc_yesno", "f1")
    assert f1_row.method == "paired-bootstrap"
    assert f1_row.diff == pytest.approx(
        f1_score(*zip(*fb, strict=True)) - f1_score(*zip(*fa, strict=True))
    )
    # What differs: the seeds lm-eval recorded.
    assert ("seeds.fewshot_seed", 1, 2) in report.pairs[0].differs


def test_cli_table_markdown_json_and_refusals(two_runs, tmp_path, capsys):
    run_a, run_b, *_ = two_runs
    out = tmp_path / "cmp.json"
    code = main(["compare", str(run_a), str(run_b), "--labels", "A,B", "--json", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    document = json.loads(out.read_text())
    [row] = document["comparisons"]
    assert list(row) == FIELDS and (row["a"], row["b"]) == ("A", "B")
    line = next(x for x in printed.splitlines() if " acc " in x)
    assert line.startswith("*") == (row["p_value_holm"] < 0.05)
    assert "what differs" in printed
    assert main(["compare", str(run_a), str(run_b), "--markdown"]) == 0
    assert capsys.readouterr().out.startswith("|  | Task | Metric")
    assert main(["compare", str(run_a), "--labels", "x,y"]) == 2
    assert "--labels 'x,y': 2 label(s) for 1 run(s)" in capsys.readouterr().err
    assert main(["compare", str(run_a), str(tmp_path / "nope")]) == 2
    assert "no such run folder" in capsys.readouterr().err
    assert main(["compare", str(run_a), str(run_a)]) == 2
    assert "labels must differ" in capsys.readouterr().err


def test_python_api_with_a_baseline_named_by_label(tmp_path):
    import assay

    folders = [
        write_run(tmp_path / n, {"qa": {"acc": _binary(40, 0.5, i)}}) for i, n in enumerate("xyz")
    ]
    report = assay.compare(*folders, baseline="z", options=assay.CompareOptions(confidence=0.9))
    assert [(c.a, c.b) for c in report.comparisons] == [("z", "x"), ("z", "y")]
    assert report.comparisons[0].confidence == 0.9
    with pytest.raises(ResultsError, match=r"1 label\(s\) for 3 run\(s\)"):
        assay.compare(*folders, labels=["only"])


def test_aggregations_named_by_results_files(tmp_path):
    a, b = _binary(30, 0.5, 60), _binary(30, 0.6, 61)
    folders = [
        write_run(tmp_path / n, {"qa": {"acc": v, "own": v}}) for n, v in (("a", a), ("b", b))
    ]
    for folder in folders:
        results = json.loads((folder / "results.json").read_text())
        results["configs"]["qa"]["metric_list"] = [
            # How results record a Python task's callable aggregation.
            {"metric": "acc", "aggregation": "assay.metrics.aggregations.mean"},
            {"metric": "own", "aggregation": "!function utils.my_aggregation"},
        ]
        (folder / "results.json").write_text(json.dumps(results))
    report = compare_runs([read_run(f) for f in folders])
    assert [c.metric for c in report.comparisons] == ["acc"]
    [note] = report.pairs[0].skipped
    assert (
        note
        == "qa own,none: its aggregation (the task's own, or unknown) cannot be recomputed here"
    )
    assert "not compared: qa own,none" in render_text(report)
