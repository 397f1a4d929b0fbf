"""Same seed, same inputs: byte-identical samples whatever the batching, task order or sharding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toy_tasks import normalised_results, output_files

import assay.run.evaluation
from assay.cli.main import main


def run(task_dir: Path, out: Path, *extra: str, tasks: str = "toy_mc,toy_gen") -> dict[str, bytes]:
    code = main(
        [
            "run",
            "--model",
            "dummy",
            "--model-args",
            "seed=3,response=' 12'",
            "--tasks",
            tasks,
            "--include-path",
            str(task_dir),
            "--num-fewshot",
            "3",
            "--output-dir",
            str(out),
            "--log-samples",
            "--no-cache",
            "--no-progress",
            *extra,
        ]
    )
    assert code == 0
    return output_files(out)


def prompts(samples: bytes) -> list[str]:
    return [json.loads(line)["arguments"]["gen_args_0"]["arg_0"] for line in samples.splitlines()]


@pytest.fixture
def baseline(task_dir, tmp_path):
    return run(task_dir, tmp_path / "baseline")


@pytest.mark.parametrize("batch_size", ["1", "3", "7", "64", "auto"])
def test_samples_do_not_depend_on_batch_size(task_dir, tmp_path, baseline, batch_size):
    assert run(task_dir, tmp_path / "b", "--batch-size", batch_size) == baseline


def test_samples_and_results_do_not_depend_on_task_order(task_dir, tmp_path, baseline):
    swapped = run(task_dir, tmp_path / "swapped", tasks="toy_gen,toy_mc")
    assert swapped == baseline
    assert (
        normalised_results(tmp_path / "swapped" / "results.json")["results"]
        == (normalised_results(tmp_path / "baseline" / "results.json")["results"])
    )


def test_samples_do_not_depend_on_shard_size(task_dir, tmp_path, baseline, monkeypatch):
    monkeypatch.setattr(assay.run.evaluation, "SHARD_DOCS", 5)
    assert run(task_dir, tmp_path / "sharded") == baseline


@pytest.mark.parametrize("limit", ["1", "10", "0.5"])
def test_limit_evaluates_a_prefix_with_the_same_prompts(task_dir, tmp_path, baseline, limit):
    limited = run(task_dir, tmp_path / "limited", "--limit", limit)
    for name, full in baseline.items():
        lines = limited[name].splitlines(keepends=True)
        assert lines, name
        # Each sample (prompt, few-shots, response, metrics) is the full run's for the same doc.
        assert b"".join(lines) == b"".join(full.splitlines(keepends=True)[: len(lines)])


def test_fewshot_examples_depend_only_on_seed_task_and_doc(task_dir, tmp_path, baseline):
    # A run over other docs of the same task (via --limit) and with other python, numpy and
    # torch seeds keeps every doc's few-shot prompt; another fewshot seed changes them.
    same = prompts(
        run(task_dir, tmp_path / "same", "--seed", "99,99,99,1234")["samples_toy_gen.jsonl"]
    )
    assert same == prompts(baseline["samples_toy_gen.jsonl"])
    other = prompts(
        run(task_dir, tmp_path / "other", "--seed", "0,1234,1234,4321")["samples_toy_gen.jsonl"]
    )
    assert other != same
    assert len(other) == len(same)


def test_fewshot_examples_do_not_depend_on_which_other_tasks_run(task_dir, tmp_path, baseline):
    alone = run(task_dir, tmp_path / "alone", tasks="toy_gen")
    assert alone["samples_toy_gen.jsonl"] == baseline["samples_toy_gen.jsonl"]
