"""results.json's provenance: versions, backend identity, settings, seeds, per-task dataset and
fingerprint of the docs evaluated; and what `assay compare` makes of it."""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

import assay
from assay.errors import ResultsError
from assay.models.dummy import DummyLM
from assay.results.compare import compare_runs
from assay.results.provenance import backend_identity
from assay.results.readers import read_run
from assay.run.api import evaluate

TASKS = Path(__file__).resolve().parents[1] / "data" / "lm_eval_runs" / "tasks"


def _run(out: Path, tasks: Path = TASKS, **settings: Any) -> dict[str, Any]:
    return evaluate(
        "dummy",
        "fxc",
        include_path=tasks,
        output_dir=out,
        log_samples=True,
        show_progress=False,
        bootstrap_iters=0,
        **settings,
    )


def test_results_record_versions_backend_settings_and_tasks(tmp_path):
    results = _run(tmp_path / "run", limit=10, seed=7)
    provenance = json.loads((tmp_path / "run" / "results.json").read_text())["provenance"]
    assert provenance == json.loads(json.dumps(results["provenance"]))
    versions = provenance["versions"]
    assert versions["assay"] == assay.__version__
    assert versions["python"] == platform.python_version()
    assert versions["torch"] == metadata.version("torch")
    assert versions["datasets"] == metadata.version("datasets")
    assert provenance["backend"]["backend"] == "dummy"
    assert provenance["backend"]["identity"] == {
        "backend": "dummy",
        "seed": 1234,
        "response": "lol",
    }
    assert provenance["settings"]["limit"] == 10
    assert provenance["seeds"] == dict.fromkeys(
        ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed"), 7
    )  # --seed 7 sets all four, as in lm-eval
    task = provenance["tasks"]["fxc_passages"]
    assert (task["dataset_path"], task["split"], task["docs"]) == ("json", "test", 10)
    assert task["cluster_key"] == "passage_id" and task["num_fewshot"] == 0
    # The fingerprint, recomputed from the samples file: sha256 over "doc_id:doc_hash" lines.
    lines = [
        json.loads(x)
        for x in (tmp_path / "run" / "samples_fxc_passages.jsonl").read_text().splitlines()
    ]
    text = "".join(
        f"{r['doc_id']}:{r['doc_hash']}\n" for r in sorted(lines, key=lambda r: r["doc_id"])
    )
    assert task["docs_fingerprint"] == hashlib.sha256(text.encode()).hexdigest()


def test_task_hash_follows_the_task_not_its_folder(tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(TASKS, copy)
    changed = tmp_path / "changed"
    shutil.copytree(TASKS, changed)
    yaml = changed / "fxc_yesno.yaml"
    yaml.write_text(yaml.read_text().replace("Answer:", "A:"))
    hashes = [
        {t: p["task_hash"] for t, p in _run(tmp_path / name, folder)["provenance"]["tasks"].items()}
        for name, folder in (("a", TASKS), ("b", copy), ("c", changed))
    ]
    assert hashes[0] == hashes[1]
    assert hashes[2]["fxc_passages"] == hashes[0]["fxc_passages"]
    assert hashes[2]["fxc_yesno"] != hashes[0]["fxc_yesno"]


class _HubModel(DummyLM):
    def provenance(self) -> Any:
        return {
            "backend": "hf",
            "model": "org/m",
            "revision": "main",
            "sha": "abc123",
            "dtype": "bfloat16",
        }


def test_backend_identity_uses_the_backend_provenance():
    identity = backend_identity(_HubModel())
    assert identity["model"] == "org/m" and identity["commit_sha"] == "abc123"
    assert identity["revision"] == "main" and identity["dtype"] == "bfloat16"
    assert identity["num_parameters"] is None  # not known: recorded as unknown, not dropped


def test_compare_names_what_differs_and_refuses_different_data(tmp_path):
    _run(tmp_path / "first")
    _run(tmp_path / "second", limit=12, seed=3)
    report = compare_runs([read_run(tmp_path / "first"), read_run(tmp_path / "second")])
    differs = {key: (a, b) for key, a, b in report.pairs[0].differs}
    assert differs["settings.limit"] == (None, 12)
    assert differs["seeds.random_seed"] == (0, 3) and differs["seeds.fewshot_seed"] == (1234, 3)
    assert differs["task.fxc_passages.docs"] == (18, 12)
    assert "task.fxc_passages.task_hash" not in differs
    assert report.pairs[0].paired_docs == {"fxc_passages": 12, "fxc_yesno": 12}
    # The same task over edited rows: the fingerprints of the shared docs differ.
    edited = tmp_path / "edited"
    shutil.copytree(TASKS, edited)
    rows = (edited / "yesno.jsonl").read_text().replace("Is 3 even?", "Is 3 odd?")
    (edited / "yesno.jsonl").write_text(rows)
    _run(tmp_path / "third", edited)
    with pytest.raises(ResultsError, match=r"task 'fxc_yesno'.*fingerprints.*the first is doc 3"):
        compare_runs([read_run(tmp_path / "first"), read_run(tmp_path / "third")])
