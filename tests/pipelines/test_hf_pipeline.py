"""run_evals through the transformers backend on a tiny random model (engine shared by configs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.pipelines import Experiment, GridSearch, HFModelConfig, List


@pytest.mark.slow
def test_hf_configs_share_one_engine_with_their_own_sampling(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    config = {
        "pipeline": HFModelConfig(
            {"model": str(tiny_model_dir), "dtype": "float32", "device": "cpu"},
            {"max_tokens": 4, "temperature": List([0.0, 1.0]), "seed": 7},
        ),
        "batch_size": 4,
        "preprocess_fn": lambda batch, rag, pm: {
            "prompts": [[{"role": "user", "content": q}] for q in batch["question"]],
            **batch,
        },
        "compute_metrics_fn": lambda batch: {
            "Nonempty": {"value": [float(bool(t)) for t in batch["generated_text"]]}
        },
        "accumulate_metrics_fn": lambda agg: {
            "Rows": {"value": sum(len(m["per_row"]) for m in agg["Nonempty"])}
        },
    }
    rows = [{"question": f"The little village number {i}"} for i in range(8)]
    exp = Experiment("hf", output_dir=tmp_path / "hf", display="none")
    results = exp.run_evals(GridSearch(config), rows, num_shards=2, seed=0)
    assert exp.engines.builds == 1
    greedy, sampled = results[1][0]["generated_text"], results[2][0]["generated_text"]
    assert len(greedy) == len(sampled) == 8
    assert greedy != sampled  # temperature 1.0 reached the shared engine
    assert results[1][1]["Rows"]["value"] == 8
    # Greedy decoding is reproducible: a second experiment answers from scratch identically.
    again = Experiment("hf2", output_dir=tmp_path / "hf2", display="none", cache_responses=False)
    assert (
        again.run_evals(GridSearch(config), rows, num_shards=2, seed=0)[1][0]["generated_text"]
        == greedy
    )
