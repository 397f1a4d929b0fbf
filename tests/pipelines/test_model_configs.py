"""Model configs: sampling parameters onto GenParams, backends through the registry."""

from __future__ import annotations

import pytest

from assay.errors import ConfigError
from assay.pipelines import HFModelConfig, ModelConfig, OpenAIAPIModelConfig, VLLMModelConfig
from assay.pipelines.configs.model_configs import gen_params_from_sampling
from assay.requests.types import normalize_gen_kwargs


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
    with pytest.raises(ConfigError, match="both set the generation length"):
        gen_params_from_sampling({"max_tokens": 4, "max_new_tokens": 5}, "t")


BAD_SAMPLING = [
    {"temperature": -1},
    {"temperature": "hot"},
    {"top_p": 1.5},
    {"top_k": 2.5},
    {"seed": "abc"},
    {"max_tokens": 0},
    {"max_tokens": True},
    {"stop": 5},
    {"max_tokens": 4, "max_completion_tokens": 5},
]


@pytest.mark.parametrize("sampling", BAD_SAMPLING, ids=repr)
def test_sampling_params_are_refused_with_the_cores_gen_kwargs_message(sampling: dict) -> None:
    """Every model config kind refuses what `normalize_gen_kwargs` refuses, in its words."""
    core = dict(sampling)
    said = ""
    if "stop" in core:
        core["until"] = core.pop("stop")
        said = " ('stop' is gen_kwargs' 'until')"

    def core_message(source: str) -> str:
        with pytest.raises(ConfigError) as refused:
            normalize_gen_kwargs(core, default_until=[], source=source + said)
        return str(refused.value)

    configs = [
        (ModelConfig("dummy", {}, sampling), "ModelConfig sampling_params"),
        (HFModelConfig({"model": "m"}, sampling), "HFModelConfig sampling_params"),
        (VLLMModelConfig({"model": "m"}, sampling), "RFvLLMModelConfig sampling_params"),
        (
            OpenAIAPIModelConfig({}, {"model": "m", **sampling}),
            "OpenAIAPIModelConfig model_config",
        ),
    ]
    for config, source in configs:
        with pytest.raises(ConfigError) as refused:
            config.gen_params()
        assert str(refused.value) == core_message(source)


def test_a_bad_sampling_value_names_the_config_when_run_evals_validates_it() -> None:
    from assay.pipelines.configs.eval_config import validate

    leaf = {"pipeline": ModelConfig("dummy", {}, {"top_p": 7}), "batch_size": 2}
    with pytest.raises(ConfigError) as refused:
        validate(leaf, config_id=3)
    assert str(refused.value) == (
        "config 3: ModelConfig sampling_params: 'top_p' must be a number from 0 to 1, got 7."
    )
    with pytest.raises(ConfigError, match="config 4: ModelConfig sampling_params: give 'stop'"):
        validate({**leaf, "pipeline": ModelConfig("d", {}, {"stop": "a", "until": "b"})}, 4)


def test_sampling_follows_the_cores_rules_for_what_it_accepts() -> None:
    # do_sample=False means greedy whatever the temperature, as in gen_kwargs.
    greedy = gen_params_from_sampling({"temperature": 0.7, "do_sample": False}, "t")
    assert (greedy.do_sample, greedy.temperature) == (False, 0.0)
    # Two names for one length that agree are one setting.
    assert gen_params_from_sampling({"max_tokens": 4, "max_new_tokens": 4}, "t").max_gen_toks == 4
    # Nothing is added to the stop strings, and unknown keys travel as written.
    plain = gen_params_from_sampling({"repetition_penalty": 1.1}, "t")
    assert plain.until == () and plain.extra == (("repetition_penalty", 1.1),)


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


def test_rapidfire_api_config_secrets_providers_and_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    from assay.pipelines import RFAPIModelConfig
    from assay.pipelines.configs.api_models import PROVIDER_BASE_URLS

    def config(**endpoint: object) -> RFAPIModelConfig:
        return RFAPIModelConfig(
            client_config={"max_retries": 2},
            endpoint_config={"endpoint": {"model": "m-1", "name": "shown"}, **endpoint},
            model_config={"max_completion_tokens": 16},
            rpm_limit=10,
            tpm_limit=1000,
        )

    first = config(provider="gemini", api_key_name="rf_test_secret", api_key="key-registered-1")
    assert first.model_args() == {
        "max_retries": 2,
        "model": "m-1",
        "base_url": PROVIDER_BASE_URLS["gemini"],
        "rpm": 10,
        "tpm": 1000,
    }
    assert first.model_name == "shown"
    # A later config names the secret alone: the registered key, never an argument.
    second = config(provider="gemini", api_key_name="rf_test_secret")
    assert second._api_key() == "key-registered-1" and second.engine_key() == first.engine_key()
    monkeypatch.setenv("RF_TEST_OTHER", "key-from-environment")
    assert config(api_key_name="rf_test_other")._api_key() == "key-from-environment"
    with pytest.raises(ConfigError, match="export RF_TEST_MISSING"):
        config(api_key_name="rf_test_missing").engine_key()
    with pytest.raises(ConfigError, match="api_base_url"):
        config(provider="azure").model_args()
    assert (
        config(provider="azure", api_base_url="http://h/v1").model_args()["base_url"]
        == "http://h/v1"
    )
    split = RFAPIModelConfig(
        client_config={},
        endpoint_config={"provider": "anthropic", "endpoint": {"model": "c"}},
        rpm_limit=5,
        itpm_limit=800,
        otpm_limit=160,
    )
    assert (split.model_args()["itpm"], split.model_args()["otpm"]) == (800, 160)
    with pytest.raises(ConfigError, match="not both"):
        RFAPIModelConfig({}, {"endpoint": {"model": "c"}}, tpm_limit=1, itpm_limit=2, otpm_limit=3)
    with pytest.raises(ConfigError, match="go together"):
        RFAPIModelConfig({}, {"endpoint": {"model": "c"}}, itpm_limit=2)
    with pytest.raises(ConfigError, match="plain list would not expand"):
        RFAPIModelConfig({}, {"endpoint": [{"model": "a"}, {"model": "b"}]})


def test_vllm_config_hands_unknown_engine_args_to_vllm_and_samples_as_written() -> None:
    from assay.models.vllm.requests import generation_params, parse_vllm_args
    from assay.requests.types import GenerateRequest

    config = VLLMModelConfig(
        {
            "model": "m",
            "dtype": "half",
            "max_model_len": 4096,
            "distributed_executor_backend": "mp",
            "enable_chunked_prefill": False,
            "disable_log_stats": True,
        },
        {"temperature": 0.8, "top_p": 0.95, "max_tokens": 512, "repetition_penalty": 1.1},
    )
    args = config.model_args()
    assert args["engine_args"] == {
        "distributed_executor_backend": "mp",
        "enable_chunked_prefill": False,
        "disable_log_stats": True,
    }
    parsed = parse_vllm_args(args)  # assay's own checks pass; vLLM judges the rest
    assert parsed.max_model_len == 4096 and parsed.engine_args == args["engine_args"]
    params = config.gen_params()
    assert params.as_given and params.max_gen_toks == 512
    sent = generation_params(GenerateRequest("p", params), default_seed=1234)
    assert sent == {"temperature": 0.8, "top_p": 0.95, "max_tokens": 512, "repetition_penalty": 1.1}
    # No max_tokens: vLLM's default of 16 sizes the room left for the prompt.
    assert VLLMModelConfig({"model": "m"}, {}).gen_params().max_gen_toks == 16
