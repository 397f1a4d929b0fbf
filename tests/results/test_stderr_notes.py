"""results.json's stderr_notes: a stderr of 0 or "N/A" keeps lm-eval's value and says why,
in the file, the printed table and the report."""

from __future__ import annotations

import json
from pathlib import Path

from assay.cli.main import main
from assay.results.readers import read_run
from assay.results.report import build_report, summary_rows
from assay.results.stderr_notes import NO_SPREAD, stderr_notes
from assay.results.table import results_tables

TASKS_DIR = Path(__file__).parents[1] / "data" / "lm_eval_parity" / "tasks"


def _run(out: Path, *flags: str) -> dict:
    argv = ["run", "--model", "dummy", "--include-path", str(TASKS_DIR)]
    argv += ["--tasks", "parity_mc_same_split", "--output-dir", str(out), *flags]
    assert main(argv) == 0
    return json.loads((out / "results.json").read_text())


def test_one_doc_keeps_lm_evals_n_a_and_says_why_everywhere(tmp_path, capsys):
    results = _run(tmp_path / "one", "--limit", "1")
    entry = results["results"]["parity_mc_same_split"]
    assert entry["acc_stderr,none"] == "N/A"  # lm-eval's value, unchanged
    why = "N/A: 1 doc: a standard error needs at least two"
    assert results["stderr_notes"] == {
        "parity_mc_same_split": {"acc_stderr,none": why, "acc_norm_stderr,none": why}
    }
    printed = capsys.readouterr().out
    assert "|   N/A†|" in printed
    assert f"† {why} (parity_mc_same_split acc,none, parity_mc_same_split acc_norm,none)" in (
        printed
    )
    run = read_run(tmp_path / "one")
    [row, *_] = summary_rows([run])
    assert row.stderr_notes == {run.label: why}
    assert why in build_report([run])  # the report's "± n/a†" shows it on hover


def test_a_run_with_measured_spreads_has_no_notes(tmp_path):
    results = _run(tmp_path / "all")
    assert isinstance(results["results"]["parity_mc_same_split"]["acc_stderr,none"], float)
    assert "stderr_notes" not in results
    assert "†" not in results_tables(results)


def test_each_reason_is_named():
    results = {
        "results": {
            "g": {"acc,none": 0.5, "acc_stderr,none": "N/A"},
            "flat": {"acc,none": 1.0, "acc_stderr,none": 0.0, "acc_stderr_clustered,none": 0.0},
            "f1": {"f1,none": 0.4, "f1_stderr,none": "N/A", "f1_stderr_clustered,none": "N/A"},
            "cl": {"acc,none": 0.4, "acc_stderr,none": 0.1, "acc_stderr_clustered,none": "N/A"},
            "fine": {"acc,none": 0.4, "acc_stderr,none": 0.1, "acc_stderr_corrected,none": "N/A"},
        },
        "group_subtasks": {"g": ["flat", "f1"]},
        "n-samples": {n: {"original": 9, "effective": 9} for n in ("flat", "f1", "cl", "fine")},
        "config": {"bootstrap_iters": 100000},
    }
    notes = stderr_notes(results)
    assert notes["flat"] == {
        "acc_stderr,none": NO_SPREAD,
        "acc_stderr_clustered,none": NO_SPREAD,
    }
    assert notes["g"]["acc_stderr,none"].startswith("N/A: a subtask has no standard error")
    assert notes["f1"]["f1_stderr,none"].startswith("N/A: no standard error for this aggr")
    assert notes["f1"]["f1_stderr_clustered,none"] == notes["f1"]["f1_stderr,none"]
    assert notes["cl"]["acc_stderr_clustered,none"].startswith("N/A: a clustered standard")
    assert "fine" not in notes  # lighteval's stderr is right there: nothing is missing
    skipped = stderr_notes({**results, "config": {"bootstrap_iters": 0}})
    assert skipped["f1"]["f1_stderr,none"] == "N/A: --bootstrap_iters 0 computes no standard errors"


FXC_TASKS = Path(__file__).parents[1] / "data" / "lm_eval_runs" / "tasks"


def test_a_bootstrap_over_few_docs_and_few_clusters_are_marked_everywhere(tmp_path, capsys):
    # f1 and mcc are bootstrapped: over 6 docs their spread is optimistic (a 5-doc bootstrap
    # covers about 0.75); clustered by the 0/1 label, Miller's stderr rests on 2 clusters.
    out = tmp_path / "few"
    argv = [
        "run",
        "--model",
        "dummy",
        "--model-args",
        "seed=1",
        "--include-path",
        str(FXC_TASKS),
        "--tasks",
        "fxc_yesno",
    ]
    assert (
        main([*argv, "--limit", "6", "--cluster-by", "fxc_yesno=label", "--output-dir", str(out)])
        == 0
    )
    printed = capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    entry, notes = results["results"]["fxc_yesno"], results["stderr_notes"]["fxc_yesno"]
    assert entry["f1_stderr,none"] > 0 and entry["acc_stderr_clustered,none"] > 0  # kept
    assert notes["f1_stderr,none"].startswith("bootstrap over 6 docs: below 30")
    assert notes["acc_stderr_clustered,none"].startswith("clustered stderr over 2 clusters")
    assert "acc_stderr,none" not in notes  # a mean's formula stderr is not a bootstrap
    assert f"{entry['f1_stderr,none']:.4f}†" in printed
    assert f"{entry['acc_stderr_clustered,none']:.4f}†" in printed
    assert "† bootstrap over 6 docs" in printed and "† clustered stderr over 2 clusters" in printed
    run = read_run(out)
    rows = {row.metric: row for row in summary_rows([run])}
    assert rows["f1"].stderr_notes[run.label] == notes["f1_stderr,none"]
    assert rows["acc"].clustered_notes[run.label] == notes["acc_stderr_clustered,none"]
    assert "clustered_notes" in build_report([run])
