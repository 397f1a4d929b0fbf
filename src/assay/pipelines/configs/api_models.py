"""API model configs in RapidFire's shape: ``RFAPIModelConfig(client_config, endpoint_config, ...)``.

RapidFire routes every provider through an MLflow AI Gateway that speaks the OpenAI chat API.
assay talks to the providers' own OpenAI-compatible endpoints instead (no gateway to run):

- ``endpoint_config["provider"]`` picks the base URL (`PROVIDER_BASE_URLS`); a provider not
  listed there, or any other server, is reached through ``endpoint_config["api_base_url"]``
  (or ``client_config["base_url"]``). ``provider: anthropic`` without a base URL goes through
  the native ``anthropic-chat`` backend (Anthropic's Messages API), which reads the
  OpenAI-shaped ``max_completion_tokens`` and ``stop`` of ``model_config`` as ``max_tokens``
  and ``stop_sequences``;
- ``endpoint_config["endpoint"]`` is ``{"name": ..., "model": ...}``: ``model`` is the
  provider's model id that requests name (``name`` when ``model`` is absent); ``name`` labels
  the config in tables. A `List` of endpoints expands under grid search;
- ``api_key_name`` names a secret. A config that gives ``api_key`` with it registers the key
  under that name for this Python process (a later config may name it without repeating the
  key, as RapidFire's reused gateway secrets); a name never given a key is read from the
  environment variable of that name (or its upper-case form). Keys reach the backend through
  this process's environment and are never written to a file, a table or a log;
- ``model_config`` holds generation parameters, sent exactly as given (dict and list values such
  as ``response_format`` included); nothing the user did not set is added;
- ``rpm_limit`` with ``tpm_limit`` (prompt + requested output tokens), or ``itpm_limit`` with
  ``otpm_limit`` (input and requested output tokens counted separately, as Anthropic meters);
- ``api_version`` (Azure) is sent as the ``api-version`` query parameter of every request;
  ``usage_tracking`` (a gateway setting) is accepted with a warning: assay keeps no usage records.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any

from assay.errors import ConfigError
from assay.pipelines.configs.knobs import List
from assay.pipelines.configs.model_configs import OpenAIAPIModelConfig, as_given_params

PROVIDER_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "gemini": "https://generativelanguage.googleapis.com/v1beta/openai/",
    "anthropic": "https://api.anthropic.com/v1/",
}
"""OpenAI-compatible endpoints of the providers RapidFire's tutorials use."""

NATIVE_BACKENDS = {"anthropic": "anthropic-chat"}
"""Providers reached through their own API and backend when the config names no base URL
(one that does, such as a gateway, is spoken to as an OpenAI-compatible server)."""


_ENDPOINT_CONFIG_KEYS = frozenset(
    {"provider", "api_key_name", "api_key", "api_base_url", "api_version", "endpoint"}
)


class NamedSecrets:
    """API keys registered under a name for the life of this process (never persisted)."""

    def __init__(self) -> None:
        self._keys: dict[str, str] = {}

    def register(self, name: str, key: str) -> None:
        self._keys[name] = key

    def resolve(self, name: str) -> str | None:
        """The key registered as `name`, else the environment variable `name` or `NAME`."""
        if name in self._keys:
            return self._keys[name]
        return os.environ.get(name) or os.environ.get(name.upper())


SECRETS = NamedSecrets()
"""The process's named secrets (RapidFire's gateway secrets, kept in memory only)."""


class APIModelConfig(OpenAIAPIModelConfig):
    """A chat model behind an OpenAI-compatible API, configured as RapidFire's RFAPIModelConfig."""

    def __init__(
        self,
        client_config: Mapping[str, Any] | None = None,
        endpoint_config: Mapping[str, Any] | None = None,
        model_config: Mapping[str, Any] | None = None,
        rag: Any = None,
        prompt_manager: Any = None,
        rpm_limit: int | None = None,
        tpm_limit: int | None = None,
        itpm_limit: int | None = None,
        otpm_limit: int | None = None,
        max_completion_tokens: int | None = None,
        verbose: bool = True,
    ) -> None:
        self._remember(locals())
        self.backend = "openai-chat"
        self.rag = rag
        self.prompt_manager = prompt_manager
        endpoint_config = endpoint_config or {}
        if "endpoint" not in endpoint_config:
            raise ConfigError(
                "RFAPIModelConfig: endpoint_config needs 'endpoint': {'name': ..., 'model': ...} "
                "(or a List of them)"
            )
        endpoint = endpoint_config["endpoint"]
        if not isinstance(endpoint, Mapping | List):
            raise ConfigError(
                "RFAPIModelConfig: endpoint_config['endpoint'] must be a dict or a List of "
                f"dicts, got {type(endpoint).__name__}; a plain list would not expand"
            )
        if itpm_limit is not None or otpm_limit is not None:
            if tpm_limit is not None:
                raise ConfigError(
                    "RFAPIModelConfig: give tpm_limit, or itpm_limit with otpm_limit, not both"
                )
            if itpm_limit is None or otpm_limit is None:
                raise ConfigError("RFAPIModelConfig: itpm_limit and otpm_limit go together")
        unknown = sorted(set(endpoint_config) - _ENDPOINT_CONFIG_KEYS)
        if unknown:
            raise ConfigError(
                f"RFAPIModelConfig: endpoint_config has unknown key(s) {unknown}; known: "
                f"{sorted(_ENDPOINT_CONFIG_KEYS)}"
            )
        key_name, key = endpoint_config.get("api_key_name"), endpoint_config.get("api_key")
        if key_name and key:
            SECRETS.register(str(key_name), str(key))
        provider = endpoint_config.get("provider", "openai")
        if provider in NATIVE_BACKENDS and not self._given_base_url():
            self.backend = NATIVE_BACKENDS[provider]

    # -- where requests go -----------------------------------------------------------------
    def _endpoint(self) -> dict[str, Any]:
        endpoint = self._params["endpoint_config"]["endpoint"]
        if isinstance(endpoint, List):
            raise ConfigError(
                "RFAPIModelConfig: endpoint is a List; expand the config with RFGridSearch first"
            )
        if "name" not in endpoint and "model" not in endpoint:
            raise ConfigError(
                f"RFAPIModelConfig: endpoint {dict(endpoint)!r} needs a 'model' (or 'name')"
            )
        unknown = sorted(set(endpoint) - {"model", "name", "usage_tracking"})
        if unknown:
            raise ConfigError(
                f"RFAPIModelConfig: endpoint has unknown key(s) {unknown}; known: model, name, "
                "usage_tracking"
            )
        if endpoint.get("usage_tracking"):
            # warnings (not logging) so that it is said once, not once per config and shard.
            warnings.warn(
                "RFAPIModelConfig endpoint usage_tracking=True is an MLflow gateway setting; "
                "assay calls providers directly and keeps no per-endpoint usage records",
                UserWarning,
                stacklevel=2,
            )
        return dict(endpoint)

    @property
    def model_name(self) -> str:
        endpoint = self._endpoint()
        return str(endpoint.get("name") or endpoint["model"])

    def _given_base_url(self) -> str | None:
        """The base URL the config names itself (api_base_url, else client_config's)."""
        client = self._params.get("client_config") or {}
        url = self._params["endpoint_config"].get("api_base_url") or client.get("base_url")
        return str(url) if url else None

    def _base_url(self) -> str:
        endpoint_config = self._params["endpoint_config"]
        url = self._given_base_url()
        if url:
            return url
        provider = endpoint_config.get("provider", "openai")
        if provider not in PROVIDER_BASE_URLS:
            raise ConfigError(
                f"RFAPIModelConfig: provider {provider!r} has no known OpenAI-compatible "
                f"endpoint (known: {sorted(PROVIDER_BASE_URLS)}); set endpoint_config "
                "'api_base_url' to its URL"
            )
        return PROVIDER_BASE_URLS[provider]

    def model_args(self) -> dict[str, Any]:
        """Backend arguments (no key: it travels through the environment)."""
        client = {
            k: v
            for k, v in (self._params.get("client_config") or {}).items()
            if k not in ("api_key", "base_url")
        }
        endpoint = self._endpoint()
        args: dict[str, Any] = {**client, "model": str(endpoint.get("model") or endpoint["name"])}
        if self.backend not in NATIVE_BACKENDS.values():  # those know their provider's URL
            args["base_url"] = self._base_url()
        version = self._params["endpoint_config"].get("api_version")
        if version:
            args["default_query"] = {"api-version": version}
        for ours, theirs in (
            ("rpm_limit", "rpm"),
            ("tpm_limit", "tpm"),
            ("itpm_limit", "itpm"),
            ("otpm_limit", "otpm"),
        ):
            if self._params.get(ours) is not None:
                args[theirs] = self._params[ours]
        return args

    def _api_key(self) -> str | None:
        endpoint_config = self._params["endpoint_config"]
        key = endpoint_config.get("api_key") or (self._params.get("client_config") or {}).get(
            "api_key"
        )
        if key:
            return str(key)
        name = endpoint_config.get("api_key_name")
        if not name:
            return None
        resolved = SECRETS.resolve(str(name))
        if resolved is None:
            raise ConfigError(
                f"RFAPIModelConfig: no key for api_key_name {name!r}: give endpoint_config "
                f"'api_key' in one config of this process, or export {str(name).upper()}"
            )
        return resolved

    # -- what requests ask -----------------------------------------------------------------
    def sampling(self) -> dict[str, Any]:
        params = dict(self._params.get("model_config") or {})
        if self._params.get("max_completion_tokens") is not None:
            params.setdefault("max_completion_tokens", self._params["max_completion_tokens"])
        return params

    def gen_params(self) -> Any:
        return as_given_params(self.sampling(), "RFAPIModelConfig model_config")

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        endpoint_config = self._params["endpoint_config"]
        out["provider"] = endpoint_config.get("provider", "openai")
        for name in ("rpm_limit", "tpm_limit", "itpm_limit", "otpm_limit"):
            if self._params.get(name) is not None:
                out[name] = self._params[name]
        return out


RFAPIModelConfig = APIModelConfig
