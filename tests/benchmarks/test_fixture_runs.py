"""benchmarks/fixture_runs.py diff: two checkouts' trees compare equal when only where they
ran, when, and how long it took differ; any other change to results or samples is reported."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "fixture_runs.py"


@pytest.fixture(scope="module")
def fixture_runs():
    spec = importlib.util.spec_from_file_location("fixture_runs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["fixture_runs"] = module
    spec.loader.exec_module(module)
    return module


def tree(folder: Path, checkout: str, acc: float, seconds: float) -> Path:
    """A tree as `run` writes it from `checkout`: one run's results.json and samples file."""
    run = folder / "one_run"
    run.mkdir(parents=True)
    (folder / "checkout.txt").write_text(checkout, encoding="utf-8")
    results = {
        "results": {"t": {"acc,none": acc}},
        "configs": {"t": {"metadata": {"config_source": f"{checkout}/examples/tasks/t.yaml"}}},
        "total_evaluation_time_seconds": str(seconds),
    }
    (run / "results.json").write_text(json.dumps(results), encoding="utf-8")
    (run / "samples_t.jsonl").write_text('{"doc_id": 0}\n', encoding="utf-8")
    return folder


def test_trees_from_two_checkouts_differ_only_where_the_numbers_do(fixture_runs, tmp_path, capsys):
    before = tree(tmp_path / "before", "/src/main", acc=0.5, seconds=3.0)
    after = tree(tmp_path / "after", "/work/branch", acc=0.5, seconds=9.0)
    assert fixture_runs._diff(before, after) == 0
    changed = tree(tmp_path / "changed", "/work/branch", acc=0.75, seconds=3.0)
    assert fixture_runs._diff(before, changed) == 1
    assert "differs: one_run/results.json" in capsys.readouterr().out
