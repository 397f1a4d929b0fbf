"""Run folders of assay and of lm-eval 0.4.13 read into typed runs.

The lm-eval folders under tests/data/lm_eval_runs were written by lm-eval's own command line
(make_runs.py there says how); the assay runs are made here on the same task files.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from assay.errors import ResultsError
from assay.results.readers import read_run
from assay.run.api import evaluate

RUNS = Path(__file__).resolve().parents[1] / "data" / "lm_eval_runs"
TASKS = RUNS / "tasks"


@pytest.fixture(scope="module")
def assay_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("assay_run") / "dummy_a"
    evaluate(
        "dummy",
        "fxc",
        include_path=TASKS,
        output_dir=out,
        log_samples=True,
        show_progress=False,
        bootstrap_iters=0,
    )
    return out


def test_lm_eval_folder_with_model_subfolder():
    run = read_run(RUNS / "dummy_seed1")
    assert run.layout == "lm-eval"
    assert run.label == "dummy_seed1"
    assert run.results_path.parent.parent == RUNS / "dummy_seed1"
    assert run.tasks() == ["fxc_passages", "fxc_yesno"]
    assert run.groups() == ["fxc"]
    assert run.leaf_tasks("fxc") == ["fxc_passages", "fxc_yesno"]
    assert run.cluster_key("fxc_passages") == "passage_id"
    assert run.cluster_key("fxc_yesno") is None


def test_lm_eval_samples_by_filter_and_doc_with_their_fingerprint():
    run = read_run(RUNS / "dummy_seed1")
    samples = run.samples("fxc_passages")
    assert list(samples.by_filter) == ["none"]
    docs = samples.docs()
    assert sorted(docs) == list(range(18))
    rows = [json.loads(x) for x in (TASKS / "passages.jsonl").read_text().splitlines()]
    for doc_id, record in docs.items():
        assert record["doc"] == rows[doc_id]
        dumped = json.dumps(rows[doc_id], indent=2, ensure_ascii=False)
        assert record["doc_hash"] == hashlib.sha256(dumped.encode()).hexdigest()
    expected = hashlib.sha256(
        "".join(f"{i}:{docs[i]['doc_hash']}\n" for i in range(18)).encode()
    ).hexdigest()
    assert samples.fingerprint() == expected
    assert run.facts()["task.fxc_passages.docs_fingerprint"] == expected


def test_a_folder_of_several_runs_reads_the_latest_and_a_results_file_picks_one(tmp_path, capsys):
    folder = tmp_path / "both"
    folder.mkdir()
    for seed in (1, 2):
        for path in (RUNS / f"dummy_seed{seed}").glob("*/*"):
            shutil.copy(path, folder / path.name)
    first, latest = sorted(folder.glob("results_*.json"))
    run = read_run(folder)
    assert run.results_path == latest
    err = capsys.readouterr().err
    assert f"holds 2 runs; reading the latest, {latest}" in err
    assert run.results["config"]["random_seed"] == 2
    run = read_run(first, label="first")
    assert run.label == "first"
    assert run.results["config"]["random_seed"] == 1
    assert len(run.samples("fxc_yesno").docs()) == 16


def test_assay_folder_reads_with_the_same_hashes_as_lm_eval(assay_run):
    """The same YAML run by assay and by lm-eval: docs and prompts hash identically, so the
    two harnesses' runs pair doc for doc."""
    ours, theirs = read_run(assay_run), read_run(RUNS / "dummy_seed1")
    assert ours.layout == "assay" and ours.label == "dummy_a"
    assert ours.tasks() == theirs.tasks()
    for task in ours.tasks():
        a, b = ours.samples(task).docs(), theirs.samples(task).docs()
        assert sorted(a) == sorted(b)
        for doc_id in a:
            assert a[doc_id]["doc_hash"] == b[doc_id]["doc_hash"]
            assert a[doc_id]["prompt_hash"] == b[doc_id]["prompt_hash"]
        assert ours.samples(task).fingerprint() == theirs.samples(task).fingerprint()


def test_unreadable_runs_are_named(tmp_path):
    with pytest.raises(ResultsError, match="no such run folder"):
        read_run(tmp_path / "missing")
    with pytest.raises(ResultsError, match=r"no results\.json"):
        read_run(tmp_path)
    (tmp_path / "results.json").write_text("{not json")
    with pytest.raises(ResultsError, match="not valid JSON"):
        read_run(tmp_path)
    (tmp_path / "results.json").write_text(json.dumps({"results": {"t": {}}}))
    run = read_run(tmp_path)
    with pytest.raises(ResultsError, match=r"no samples file for task 't'.*--log-samples"):
        run.samples("t")


def test_duplicated_doc_in_a_samples_file_is_refused(tmp_path):
    line = json.dumps({"doc_id": 3, "doc_hash": "h", "filter": "none"}) + "\n"
    (tmp_path / "results.json").write_text(json.dumps({"results": {"t": {}}}))
    (tmp_path / "samples_t.jsonl").write_text(line + line)
    with pytest.raises(ResultsError, match=r"line 2: doc_id 3 appears twice under filter 'none'"):
        read_run(tmp_path).samples("t")


def test_facts_of_an_lm_eval_run_use_the_provenance_keys(tmp_path):
    facts = read_run(RUNS / "dummy_seed1").facts()
    assert facts["harness"] == "lm-eval 0.4.13"
    assert facts["backend.backend"] == "dummy" and "backend.model" not in facts
    assert (
        facts["seeds.random_seed"] == facts["seeds.fewshot_seed"] == 1
        and facts["settings.batch_size"] == 1
    )
    assert facts["task.fxc_yesno.docs"] == 16
    # An hf run: the model named by model_args, lm-eval's dtype without "torch.", the batch
    # size its command line recorded as a string read as a number.
    results = json.loads(next((RUNS / "dummy_seed1").glob("*/results_*.json")).read_text())
    results["config"].update(
        model="hf",
        model_args={"pretrained": "org/model", "dtype": "float32"},
        model_dtype="torch.float32",
        model_sha="",
        batch_size="16",
    )
    (tmp_path / "results_2026-01-01T00-00-00.json").write_text(json.dumps(results))
    facts = read_run(tmp_path).facts()
    assert facts["backend.model"] == "org/model" and facts["backend.dtype"] == "float32"
    assert "backend.commit_sha" not in facts and facts["settings.batch_size"] == 16


def test_only_recorded_differences_are_listed_between_harnesses(assay_run):
    from assay.results.compare import what_differs

    differs = dict(
        (k, (a, b)) for k, a, b in what_differs(read_run(RUNS / "dummy_seed1"), read_run(assay_run))
    )
    assert differs["harness"][0] == "lm-eval 0.4.13" and differs["harness"][1].startswith("assay")
    assert differs["seeds.random_seed"] == (1, 0) and differs["seeds.torch_seed"] == (1, 1234)
    assert not any(k.startswith("versions.") and k != "versions.transformers" for k in differs)
    assert not any(k.endswith("docs_fingerprint") for k in differs)
