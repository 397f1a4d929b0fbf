"""Model configs of eval pipelines: which backend to build and how to sample from it.

Source-compatible with RapidFire's ``RFvLLMModelConfig(model_config, sampling_params, rag,
prompt_manager)`` and ``RFOpenAIAPIModelConfig(client_config, model_config, ...)``. Models are
built through assay's MODELS registry; sampling parameters become a `GenParams` sent with every
request, so configs that share a model share one engine but each keeps its own sampling.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from assay.errors import ConfigError
from assay.pipelines.configs.fingerprint import fingerprint
from assay.pipelines.configs.knobs import Configurable, describe_value
from assay.requests.types import MAX_TOKEN_ALIASES, GenParams, normalize_gen_kwargs
from assay.util.redact import redact

if TYPE_CHECKING:
    from assay.models.base import LM

VLLM_DEFAULT_MAX_TOKENS = 16
"""vllm.SamplingParams' max_tokens when none is given."""


def refuse_several_outputs(sampling_params: Mapping[str, Any], where: str) -> None:
    """Refuse n != 1: run_evals scores one output per prompt."""
    n = sampling_params.get("n", 1)
    if n != 1:
        raise ConfigError(
            f"{where}: sampling_params n={n!r} is not supported; run_evals scores one output per "
            "prompt. Use a List of seeds to compare several samples."
        )


def checked_sampling(sampling_params: Mapping[str, Any], where: str) -> GenParams:
    """vLLM / OpenAI style sampling parameters under the core's gen_kwargs rules.

    ``stop`` is the core's ``until``; the generation length, temperature, do_sample, top_p,
    top_k and seed follow `normalize_gen_kwargs` (names, types, ranges and its messages, with
    `where` as the source); anything else travels in ``extra``. Nothing is added to the stop
    strings.
    """
    params = {k: v for k, v in sampling_params.items() if k != "n"}
    if "stop" in params:
        if "until" in params:
            raise ConfigError(f"{where}: give 'stop' or 'until', not both (they are one setting)")
        params["until"] = params.pop("stop")
        # The core's messages name 'until': say it is the 'stop' the user wrote.
        where = f"{where} ('stop' is gen_kwargs' 'until')"
    return normalize_gen_kwargs(params, default_until=[], source=where)


def gen_params_from_sampling(sampling_params: Mapping[str, Any] | None, where: str) -> GenParams:
    """Map vLLM / OpenAI style sampling parameters onto `GenParams` (see `checked_sampling`).

    max_tokens (or max_new_tokens / max_completion_tokens) -> max_gen_toks, stop -> until;
    temperature, top_p, top_k and seed keep their names; a positive temperature implies sampling
    unless do_sample is given; anything else travels in `extra` for backends that accept it.
    """
    params = dict(sampling_params or {})
    refuse_several_outputs(params, where)
    return checked_sampling(params, where)


def as_given_params(params: Mapping[str, Any], where: str) -> GenParams:
    """Generation parameters an API receives exactly as written (nothing added).

    They are checked by the core's rules first (`checked_sampling`), so a value the core
    refuses is refused here with the same message. The requested output size
    (max_completion_tokens or max_tokens) also sizes token rate limits; without one, limits
    count the backend's default.
    """
    checked = checked_sampling(params, where)
    kwargs: dict[str, Any] = {"as_given": True, "extra": tuple(sorted(params.items()))}
    if any(k in params for k in MAX_TOKEN_ALIASES):
        kwargs["max_gen_toks"] = checked.max_gen_toks
    return GenParams(**kwargs)


def key_variable(key: str) -> str:
    """The environment variable that hands `key` to a backend (named by the key's hash)."""
    return f"ASSAY_API_KEY_{hashlib.sha256(key.encode()).hexdigest()[:12].upper()}"


class ModelConfig(Configurable):
    """Any registered backend: ``ModelConfig("dummy", {"response": "42"}, {"max_tokens": 8})``."""

    def __init__(
        self,
        backend: str,
        model_args: Mapping[str, Any] | None = None,
        sampling_params: Mapping[str, Any] | None = None,
        rag: Any = None,
        prompt_manager: Any = None,
    ) -> None:
        self._remember(locals())
        self.backend = backend
        self.rag = rag
        self.prompt_manager = prompt_manager

    def model_args(self) -> dict[str, Any]:
        """Keyword arguments of the registered backend factory."""
        return dict(self._params.get("model_args") or {})

    def sampling(self) -> dict[str, Any]:
        """The sampling parameters as the user wrote them."""
        return dict(self._params.get("sampling_params") or {})

    def gen_params(self) -> GenParams:
        """Sampling parameters as sent with every request of this config."""
        return gen_params_from_sampling(self.sampling(), f"{type(self).__name__} sampling_params")

    @property
    def model_name(self) -> str:
        args = self.model_args()
        return str(args.get("pretrained") or args.get("model") or self.backend)

    def engine_key(self) -> str:
        """Configs with the same key share one loaded engine."""
        return fingerprint({"backend": self.backend, "model_args": self.model_args()})

    def build(self) -> LM:
        """Build the engine through the MODELS registry."""
        from assay.models.base import load_model

        return load_model(self.backend, self.model_args())

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model_name": self.model_name}
        out["sampling_params"] = describe_value(self.sampling())
        if self.rag is not None:
            out["rag"] = describe_value(self.rag)
        if self.prompt_manager is not None:
            out["prompt_manager"] = describe_value(self.prompt_manager)
        return redact(out)


class HFModelConfig(ModelConfig):
    """A transformers model: ``model_config`` holds `--model hf` args (``model`` = ``pretrained``)."""

    def __init__(
        self,
        model_config: Mapping[str, Any],
        sampling_params: Mapping[str, Any] | None = None,
        rag: Any = None,
        prompt_manager: Any = None,
    ) -> None:
        self._remember(locals())
        self.backend = "hf"
        self.rag = rag
        self.prompt_manager = prompt_manager

    def model_args(self) -> dict[str, Any]:
        args = dict(self._params["model_config"])
        if "model" in args:
            args.setdefault("pretrained", args.pop("model"))
        return args


class VLLMModelConfig(HFModelConfig):
    """A vLLM model: ``model_config`` as for ``vllm.LLM``, ``sampling_params`` as for
    ``vllm.SamplingParams``.

    Every ``vllm.LLM`` argument is accepted: those assay's vllm backend knows (``model``,
    ``dtype``, ``max_model_len``, ...) go through its checks, any other one
    (``distributed_executor_backend``, ``enable_chunked_prefill``, ``disable_log_stats``, ...)
    is handed to vLLM as it is, and vLLM refuses what it does not know. Sampling parameters
    reach ``SamplingParams`` exactly as written (vLLM's defaults for the rest, as in RapidFire).
    """

    def __init__(
        self,
        model_config: Mapping[str, Any],
        sampling_params: Mapping[str, Any] | None = None,
        rag: Any = None,
        prompt_manager: Any = None,
    ) -> None:
        super().__init__(model_config, sampling_params, rag, prompt_manager)
        self.backend = "vllm"

    def model_args(self) -> dict[str, Any]:
        from assay.models.vllm.requests import VLLM_ARGS

        args = super().model_args()
        passed = {k: args.pop(k) for k in list(args) if k not in VLLM_ARGS}
        if passed:
            args["engine_args"] = {**(args.get("engine_args") or {}), **passed}
        return args

    def gen_params(self) -> GenParams:
        sampling = self.sampling()
        refuse_several_outputs(sampling, "RFvLLMModelConfig")
        params = as_given_params(sampling, "RFvLLMModelConfig sampling_params")
        if "max_tokens" not in sampling:
            # vLLM's own default, which sizes the room left for the prompt.
            params = replace(params, max_gen_toks=VLLM_DEFAULT_MAX_TOKENS)
        return params


class OpenAIAPIModelConfig(ModelConfig):
    """An OpenAI-compatible API model.

    ``client_config`` holds client settings (``api_key``, ``base_url``, ``max_retries``,
    ``timeout``); ``model_config`` holds ``model`` and its sampling settings (``temperature``,
    ``max_completion_tokens``, ...). ``rpm_limit`` / ``tpm_limit`` become the backend's ``rpm`` /
    ``tpm`` rate limits. The API key reaches the backend through an environment variable, so it
    never appears in model arguments, tables, stored configs or engine identities. Requests
    carry the ``model_config`` settings exactly as written, and nothing else.
    """

    def __init__(
        self,
        client_config: Mapping[str, Any],
        model_config: Mapping[str, Any],
        rag: Any = None,
        prompt_manager: Any = None,
        rpm_limit: int | None = None,
        tpm_limit: int | None = None,
        max_completion_tokens: int | None = None,
        chat: bool = True,
    ) -> None:
        self._remember(locals())
        self.backend = "openai-chat" if chat else "openai-completions"
        self.rag = rag
        self.prompt_manager = prompt_manager
        if "model" not in model_config:
            raise ConfigError("OpenAIAPIModelConfig: model_config needs 'model'")

    def model_args(self) -> dict[str, Any]:
        """Backend arguments; the API key itself is handed over through the environment."""
        client = {k: v for k, v in self._params["client_config"].items() if k != "api_key"}
        args = {"model": self._params["model_config"]["model"], **client}
        for ours, theirs in (("rpm_limit", "rpm"), ("tpm_limit", "tpm")):
            if self._params.get(ours) is not None:
                args[theirs] = self._params[ours]
        return args

    def _api_key(self) -> str | None:
        return self._params["client_config"].get("api_key")

    def engine_key(self) -> str:
        key = self._api_key()
        key_id = hashlib.sha256(key.encode()).hexdigest() if key else None
        return fingerprint({"backend": self.backend, "args": self.model_args(), "key": key_id})

    def build(self) -> LM:
        """Build the backend; a client_config api_key reaches it as an environment variable."""
        from assay.models.base import load_model

        args = self.model_args()
        key = self._api_key()
        if key:
            os.environ[key_variable(key)] = key
            args["api_key_env"] = key_variable(key)
        return load_model(self.backend, args)

    def sampling(self) -> dict[str, Any]:
        params = {k: v for k, v in self._params["model_config"].items() if k != "model"}
        if self._params.get("max_completion_tokens") is not None:
            params.setdefault("max_completion_tokens", self._params["max_completion_tokens"])
        return params

    def gen_params(self) -> GenParams:
        return as_given_params(self.sampling(), f"{type(self).__name__} model_config")


RFvLLMModelConfig = VLLMModelConfig
RFOpenAIAPIModelConfig = OpenAIAPIModelConfig
RFHFModelConfig = HFModelConfig
