"""RapidFire's clone-and-modify payload applied to a parent config."""

from __future__ import annotations

import pytest

from assay.errors import ConfigError
from assay.pipelines import RagSpec, RFAPIModelConfig, RFvLLMModelConfig
from assay.pipelines.experiment.cloning import apply_changes


def vllm_leaf() -> dict:
    rag = RagSpec(search_cfg={"type": "similarity", "k": 15}, reranker_cfg=None)
    return {
        "pipeline": RFvLLMModelConfig(
            {"model": "m", "max_model_len": 4096},
            {"temperature": 0.8, "top_p": 0.95, "max_tokens": 512},
            rag=rag,
        ),
        "batch_size": 128,
        "online_strategy_kwargs": {"strategy_name": "normal", "confidence_level": 0.95},
    }


def test_vllm_payload_merges_key_by_key_and_resets_a_new_search_type() -> None:
    leaf = vllm_leaf()
    clone = apply_changes(
        leaf,
        {
            "pipeline_type": "vllm",
            "sampling_params": {"temperature": 0.2},
            "rag_config": {"search_cfg": {"type": "mmr"}},
            "batch_size": 16,
            "online_strategy_kwargs": {"confidence_level": 0.9},
        },
    )
    model = clone["pipeline"]
    assert model.sampling() == {"temperature": 0.2, "top_p": 0.95, "max_tokens": 512}
    assert model.model_args()["max_model_len"] == 4096  # inherited
    # A new search type starts from its own defaults, not the parent's k.
    assert model.rag.search_settings() == {"type": "mmr", "k": 5, "fetch_k": 20, "lambda_mult": 0.5}
    assert clone["batch_size"] == 16
    assert clone["online_strategy_kwargs"] == {"strategy_name": "normal", "confidence_level": 0.9}
    same_type = apply_changes(leaf, {"rag_config": {"search_cfg": {"k": 3}}})
    assert same_type["pipeline"].rag.search_settings() == {"type": "similarity", "k": 3}
    assert leaf["pipeline"].sampling()["temperature"] == 0.8  # the parent is untouched


def test_api_payload_limits_and_refusals() -> None:
    leaf = {
        "pipeline": RFAPIModelConfig(
            client_config={"max_retries": 2},
            endpoint_config={
                "provider": "openai",
                "api_key": "sk-abcdef",
                "endpoint": {"model": "gpt", "name": "gpt"},
            },
            model_config={"max_completion_tokens": 64, "response_format": {"type": "json"}},
            rpm_limit=100,
            tpm_limit=1000,
        ),
        "batch_size": 8,
    }
    clone = apply_changes(
        leaf,
        {"model_config": {"max_completion_tokens": 32}, "itpm_limit": 500, "otpm_limit": 200},
    )
    params = clone["pipeline"].knob_params()
    assert params["model_config"] == {
        "max_completion_tokens": 32,
        "response_format": {"type": "json"},
    }
    assert (params["tpm_limit"], params["itpm_limit"], params["otpm_limit"]) == (None, 500, 200)
    assert clone["pipeline"].model_args()["itpm"] == 500
    with pytest.raises(ConfigError, match="does not match the parent's 'api'"):
        apply_changes(leaf, {"pipeline_type": "vllm", "sampling_params": {}})
    with pytest.raises(ConfigError, match="cannot change \\['sampling_params'\\]"):
        apply_changes(leaf, {"pipeline_type": "api", "sampling_params": {"top_p": 1}})
    with pytest.raises(ConfigError, match="no RAG spec"):
        apply_changes(leaf, {"rag_config": {"search_cfg": {"k": 2}}})
