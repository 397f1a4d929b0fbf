"""OpenAI's SDK as a `provider.Provider`: the official `openai` client, for OpenAI and every
server that speaks its API (vLLM, llama.cpp, `transformers serve`, gateways)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assay.errors import ModelError
from assay.models.api.batch_providers import OPENAI_LIMITS, OpenAIBatches
from assay.models.api.batches import BatchLimits, BatchProvider
from assay.models.api.pacing import ProviderSignals, read_signals
from assay.models.api.provider import ClientSettings, Key, OnResponse, credentials_hint
from assay.models.api.usage import Usage, openai_usage
from assay.util.redact import clean_text, redact_url


class OpenAIProvider:
    """The `openai` package: clients, batches (/files + /batches), usage and answers."""

    package = "openai"
    batch_limits = OPENAI_LIMITS

    def sdk(self, backend: str) -> Any:
        try:
            import openai
        except ImportError:
            raise ModelError(
                f"--model {backend} needs the openai package; install assay[api]."
            ) from None
        return openai

    def async_client(self, settings: ClientSettings, key: Key, on_response: OnResponse) -> Any:
        sdk = self.sdk("openai")
        return sdk.AsyncOpenAI(
            api_key=key.reveal(),
            base_url=settings.base_url,
            default_query=settings.default_query,
            default_headers=settings.default_headers,
            max_retries=0,
            timeout=settings.timeout,
            http_client=sdk.DefaultAsyncHttpxClient(event_hooks={"response": [on_response]}),
        )

    def sync_client(self, settings: ClientSettings, key: Key) -> Any:
        return self.sdk("openai").OpenAI(
            api_key=key.reveal(),
            base_url=settings.base_url,
            default_query=settings.default_query,
            default_headers=settings.default_headers,
            max_retries=settings.max_retries,
            timeout=settings.timeout,
        )

    def batch_provider(
        self, client: Any, base_url: str, endpoint: str, limits: BatchLimits
    ) -> BatchProvider:
        return OpenAIBatches(client, self.sdk("openai"), base_url, endpoint, clean_text, limits)

    def usage(self, usage: Any) -> Usage:
        return openai_usage(usage)

    def typed_answer(self, body: dict[str, Any], endpoint: str) -> Any:
        if endpoint.endswith("/chat/completions"):
            from openai.types.chat import ChatCompletion

            return ChatCompletion.model_validate(body)
        from openai.types import Completion

        return Completion.model_validate(body)

    def signals(self, headers: Mapping[str, str]) -> ProviderSignals:
        return read_signals(headers)

    def status_hint(self, status: int, settings: ClientSettings, api_key_env: str) -> str:
        if status == 404:
            return (
                f" (check base_url={redact_url(settings.base_url)!r}, which usually ends in /v1, "
                f"and model={settings.model!r})"
            )
        return credentials_hint(status, api_key_env)
