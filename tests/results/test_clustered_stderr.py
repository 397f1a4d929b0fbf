"""Clustered standard errors in a run: declared by the task (metadata.cluster_key), or chosen
with --cluster-by; recorded in results.json beside lm-eval's stderr and in every sample."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from assay.cli.main import main
from assay.errors import ConfigError, DataError, TaskConfigError
from assay.results.schema import cluster_label
from assay.run.api import evaluate
from assay.run.setting_checks import parse_cluster_by
from assay.tasks.registry import Registry

TASKS = Path(__file__).resolve().parents[1] / "data" / "lm_eval_runs" / "tasks"


def _miller(values: list[float], clusters: list[str]) -> float:
    """Miller (2024) eq. 4, written out: s²/n plus the within-cluster cross-products / n²."""
    x = np.asarray(values)
    n = len(x)
    e = x - x.mean()
    cross = sum(
        e[i] * e[j] for i in range(n) for j in range(n) if i != j and clusters[i] == clusters[j]
    )
    return math.sqrt(x.var(ddof=1) / n + cross / n**2)


def _samples(folder: Path, task: str) -> list[dict]:
    return [json.loads(x) for x in (folder / f"samples_{task}.jsonl").read_text().splitlines()]


def test_yaml_metadata_declares_the_cluster_key():
    resolved = Registry([TASKS]).resolve(["fxc"])
    keys = {t.config.name: t.config.cluster_key for t in resolved.tasks}
    assert keys == {"fxc_passages": "passage_id", "fxc_yesno": None}


def test_results_carry_the_clustered_stderr_of_each_mean_metric(tmp_path):
    out = tmp_path / "run"
    results = evaluate(
        "dummy",
        "fxc",
        include_path=TASKS,
        output_dir=out,
        log_samples=True,
        show_progress=False,
    )
    samples = _samples(out, "fxc_passages")
    rows = [json.loads(x) for x in (TASKS / "passages.jsonl").read_text().splitlines()]
    assert [s["cluster"] for s in samples] == [rows[s["doc_id"]]["passage_id"] for s in samples]
    entry = results["results"]["fxc_passages"]
    for metric in ("acc", "acc_norm"):
        values = [s[metric] for s in samples]
        expected = _miller(values, [s["cluster"] for s in samples])
        assert entry[f"{metric}_stderr_clustered,none"] == pytest.approx(expected, rel=1e-12)
        assert entry[f"{metric}_stderr,none"] == pytest.approx(np.std(values, ddof=1) / 18**0.5)
    # A task without a cluster key keeps lm-eval's keys only, and its samples no cluster.
    assert not any("clustered" in k for k in results["results"]["fxc_yesno"])
    assert "cluster" not in _samples(out, "fxc_yesno")[0]
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk["results"]["fxc_passages"]["acc_stderr_clustered,none"] == pytest.approx(
        entry["acc_stderr_clustered,none"]
    )


def test_cluster_by_on_the_command_line_wins_and_reaches_any_task(tmp_path):
    out = tmp_path / "run"
    code = main(
        [
            "run", "--model", "dummy", "--tasks", "fxc", "--include-path", str(TASKS),
            "--output-dir", str(out), "--log-samples", "--no-progress",
            "--cluster-by", "fxc_yesno=label", "--cluster-by", "fxc_passages=label",
        ]
    )  # fmt: skip
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    for task in ("fxc_yesno", "fxc_passages"):
        samples = _samples(out, task)
        assert [s["cluster"] for s in samples] == [s["doc"]["label"] for s in samples]
        expected = _miller([s["acc"] for s in samples], [str(s["cluster"]) for s in samples])
        assert results["results"][task]["acc_stderr_clustered,none"] == pytest.approx(expected)
    # f1 is a corpus-level aggregation: no closed-form clustered stderr.
    assert results["results"]["fxc_yesno"]["f1_stderr_clustered,none"] == "N/A"


def test_a_cluster_field_the_docs_lack_fails_before_the_model_loads(tmp_path):
    with pytest.raises(DataError, match=r"cluster field 'passage' .* its fields are"):
        evaluate(
            "dummy",
            "fxc_passages",
            include_path=TASKS,
            cluster_by={"fxc_passages": "passage"},
            show_progress=False,
        )


def test_cluster_by_refuses_other_tasks_and_malformed_values(capsys):
    with pytest.raises(ConfigError, match="--cluster-by: 'race' is not a task of this run"):
        evaluate("dummy", "fxc_yesno", include_path=TASKS, cluster_by="race=article")
    with pytest.raises(ConfigError, match="expected TASK=FIELD"):
        parse_cluster_by(["race"])
    assert parse_cluster_by(["a=x,b=y", "c=z"]) == {"a": "x", "b": "y", "c": "z"}
    code = main(["run", "--model", "dummy", "--tasks", "fxc_yesno", "--cluster-by", "=x"])
    assert code == 2 and "expected TASK=FIELD" in capsys.readouterr().err


def test_a_cluster_key_that_is_not_a_field_name_is_refused(tmp_path):
    text = (TASKS / "fxc_yesno.yaml").read_text().replace("version: 1.0", "cluster_key: [a]")
    (tmp_path / "bad.yaml").write_text(text.replace("yesno.jsonl", str(TASKS / "yesno.jsonl")))
    with pytest.raises(TaskConfigError, match=r"'metadata.cluster_key' must name a dataset"):
        Registry([tmp_path]).resolve(["fxc_yesno"])


def test_built_ins_whose_questions_share_a_context_declare_their_cluster_key():
    resolved = Registry().resolve(["drop", "leaderboard_musr", "race", "mmlu_anatomy"])
    keys = {t.config.name: t.config.cluster_key for t in resolved.tasks}
    assert keys["drop"] == "passage"
    for split in ("murder_mysteries", "object_placements", "team_allocation"):
        assert keys[f"leaderboard_musr_{split}"] == "narrative"
    assert keys["race"] is None and keys["mmlu_anatomy"] is None


def test_long_cluster_values_are_recorded_by_their_hash():
    story = "A long story. " * 20
    label = cluster_label(story)
    assert label == "sha256:" + hashlib.sha256(story.encode()).hexdigest()[:16]
    assert cluster_label("p3") == "p3" and cluster_label(7) == 7
