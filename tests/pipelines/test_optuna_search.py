"""OptunaSearch (RFOptuna): search space, pruning between shards, replacements, final values."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from pipeline_fakes import arithmetic_rows

from assay.errors import ConfigError
from assay.pipelines import Experiment, List, ModelConfig, Range, RFOptuna
from assay.pipelines.configs.optuna_search import labels, search_space, substitute


def preprocess(batch: dict, rag: Any, prompt_manager: Any) -> dict:
    return {"prompts": [q.removeprefix("What is ") for q in batch["question"]], **batch}


def compute(batch: dict) -> dict:
    right = [
        out.split("#### ")[-1] == a.split("#### ")[-1]
        for out, a in zip(batch["generated_text"], batch["answer"])
    ]
    return {"Correct": {"value": sum(right)}, "Total": {"value": len(right)}}


def accumulate(aggregated: dict) -> dict:
    correct = sum(m["value"] for m in aggregated["Correct"])
    total = sum(m["value"] for m in aggregated["Total"])
    return {"Accuracy": {"value": correct / total, "is_algebraic": True, "value_range": (0, 1)}}


def template() -> dict[str, Any]:
    # CalcLM answers right greedily and adds 1 when it samples: temperature > 0 scores 0.
    return {
        "pipeline": ModelConfig(
            "pipelines-calc", {}, {"max_tokens": 8, "temperature": List([0.0, 0.9])}
        ),
        "batch_size": Range(2, 4),
        "preprocess_fn": preprocess,
        "compute_metrics_fn": compute,
        "accumulate_metrics_fn": accumulate,
    }


def test_search_space_paths_labels_and_substitution() -> None:
    space = dict(search_space(template()))
    assert set(space) == {"pipeline.sampling_params.temperature", "batch_size"}
    leaf = substitute(template(), {"pipeline.sampling_params.temperature": 0.9, "batch_size": 3})
    assert leaf["batch_size"] == 3 and leaf["pipeline"].sampling()["temperature"] == 0.9
    assert labels([{"chunk_size": 128, "k": 1}, {"chunk_size": 256, "k": 1}]) == [
        "cfg(chunk_size=128)",
        "cfg(chunk_size=256)",
    ]
    with pytest.raises(ConfigError, match="maximize:<metric>"):
        RFOptuna(configs=[template()], objective="NDCG@5")
    with pytest.raises(ConfigError, match="no List or Range"):
        RFOptuna(configs=[{"batch_size": 2}]).get_runs()


def test_pruned_configs_are_replaced_until_the_budget(tmp_path: Path) -> None:
    pytest.importorskip("optuna")
    from optuna.trial import TrialState

    search = RFOptuna(
        configs=[template()],
        n_initial=4,
        budget=6,
        objective="maximize:Accuracy",
        sampler="random",
        pruner="median",
        seed=1,
    )
    exp = Experiment("optuna", output_dir=tmp_path / "optuna", display="none")
    results = exp.run_evals(search, arithmetic_rows(8), num_shards=4, seed=0)
    study = search._study
    trials = study.trials
    assert 4 <= len(trials) <= 6 and search.spawned == len(trials)
    pruned = [t for t in trials if t.state == TrialState.PRUNED]
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(pruned) + len(done) == len(trials)
    # Only the sampling configs (accuracy 0) can lose to the median of the others.
    assert pruned and all(t.params["pipeline.sampling_params.temperature"] == 0.9 for t in pruned)
    # Each prune asked for a replacement while the budget allowed.
    assert len(trials) == min(6, 4 + len(pruned))
    for t in done:
        greedy = t.params["pipeline.sampling_params.temperature"] == 0.0
        assert t.value == (1.0 if greedy else 0.0)
    # Every trial ran as a config whose results are returned (pruned ones partially).
    assert len(results) == len(trials)
    stopped = [m for _, m in results.values() if m["Samples Processed"]["value"] < 8]
    assert len(stopped) == len(pruned)
    # The seed makes the study reproducible.
    random.seed(0)
    again = RFOptuna(
        configs=[template()], n_initial=4, budget=6, objective="maximize:Accuracy",
        sampler="random", seed=1,
    )  # fmt: skip
    assert [r["batch_size"] for r in again.get_runs()] == [
        t.params["batch_size"] for t in trials[:4]
    ]
