"""Model configs: sampling parameters onto GenParams, backends through the registry."""

from __future__ import annotations

import pytest

from assay.errors import ConfigError
from assay.pipelines import HFModelConfig, ModelConfig, OpenAIAPIModelConfig, VLLMModelConfig
from assay.pipelines.model_configs import gen_params_from_sampling


def test_vllm_style_sampling_params_map_onto_gen_params() -> None:
    p = gen_params_from_sampling(
        {
            "max_tokens": 64,
            "temperature": 0.7,
            "top_p": 0.9,
            "top_k": 20,
            "stop": "\n\n",
            "seed": 3,
            "presence_penalty": 0.1,
        },
        "test",
    )
    assert (p.max_gen_toks, p.temperature, p.top_p, p.top_k, p.seed) == (64, 0.7, 0.9, 20, 3)
    assert p.until == ("\n\n",) and p.do_sample is True
    assert p.extra == (("presence_penalty", 0.1),)
    assert gen_params_from_sampling({"temperature": 0}, "t").do_sample is False
    with pytest.raises(ConfigError, match="n=4"):
        gen_params_from_sampling({"n": 4}, "t")
    with pytest.raises(ConfigError, match="only one"):
        gen_params_from_sampling({"max_tokens": 4, "max_new_tokens": 5}, "t")


def test_configs_name_their_backend_and_args() -> None:
    hf = HFModelConfig({"model": "/models/tiny", "dtype": "float32"}, {"max_tokens": 8})
    assert hf.backend == "hf" and hf.model_args() == {
        "pretrained": "/models/tiny",
        "dtype": "float32",
    }
    vllm = VLLMModelConfig({"model": "m", "dtype": "half"}, {"max_tokens": 8})
    assert vllm.backend == "vllm" and vllm.model_name == "m"
    api = OpenAIAPIModelConfig(
        client_config={"api_key": "sk-test-123456", "base_url": "http://127.0.0.1:9"},
        model_config={"model": "gpt-x", "temperature": 0.2, "max_completion_tokens": 32},
        rpm_limit=60,
    )
    assert api.backend == "openai-chat"
    assert api.model_args()["model"] == "gpt-x" and api.model_args()["rpm"] == 60
    assert "sk-test" not in repr(api.model_args())
    # Sent exactly as written: max_gen_toks only sizes rate limits.
    assert api.gen_params().as_given and api.gen_params().max_gen_toks == 32
    assert dict(api.gen_params().extra) == {"temperature": 0.2, "max_completion_tokens": 32}
    assert "sk-test" not in repr(api.describe())
    # Same model, different sampling: one engine.
    a = ModelConfig("dummy", {"seed": 1}, {"temperature": 0.0})
    b = a.replace(sampling_params={"temperature": 0.9})
    assert a.engine_key() == b.engine_key() != a.replace(model_args={"seed": 2}).engine_key()
    assert ModelConfig("dummy").build().generate_until([]) == []
