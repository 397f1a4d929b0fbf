"""Anthropic's SDK as a `provider.Provider`: the official `anthropic` client, its Message
Batches API and its usage fields (cache reads and writes apart from `input_tokens`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assay.errors import ModelError
from assay.models.api.anthropic_messages import anthropic_usage
from assay.models.api.batch_providers import ANTHROPIC_LIMITS, AnthropicBatches
from assay.models.api.batches import BatchLimits, BatchProvider
from assay.models.api.pacing import ProviderSignals, read_signals
from assay.models.api.provider import ClientSettings, Key, OnResponse, credentials_hint
from assay.models.api.usage import Usage
from assay.util.redact import clean_text, redact_url


class AnthropicProvider:
    """The `anthropic` package: clients, /v1/messages/batches, usage and typed messages."""

    package = "anthropic"
    batch_limits = ANTHROPIC_LIMITS

    def sdk(self, backend: str) -> Any:
        try:
            import anthropic
        except ImportError:
            raise ModelError(
                f"--model {backend} needs the anthropic package; install assay[api]."
            ) from None
        return anthropic

    def async_client(self, settings: ClientSettings, key: Key, on_response: OnResponse) -> Any:
        # Anthropic's client takes no default query: the Messages API needs none.
        sdk = self.sdk("anthropic-chat")
        return sdk.AsyncAnthropic(
            api_key=key.reveal(),
            base_url=settings.base_url,
            default_headers=settings.default_headers,
            max_retries=0,
            timeout=settings.timeout,
            http_client=sdk.DefaultAsyncHttpxClient(event_hooks={"response": [on_response]}),
        )

    def sync_client(self, settings: ClientSettings, key: Key) -> Any:
        return self.sdk("anthropic-chat").Anthropic(
            api_key=key.reveal(),
            base_url=settings.base_url,
            default_headers=settings.default_headers,
            max_retries=settings.max_retries,
            timeout=settings.timeout,
        )

    def batch_provider(
        self, client: Any, base_url: str, endpoint: str, limits: BatchLimits
    ) -> BatchProvider:
        # One batch endpoint for every request: /v1/messages/batches takes no endpoint.
        return AnthropicBatches(client, self.sdk("anthropic-chat"), base_url, clean_text, limits)

    def usage(self, usage: Any) -> Usage:
        return anthropic_usage(usage)

    def typed_answer(self, body: dict[str, Any], endpoint: str) -> Any:
        return self.sdk("anthropic-chat").types.Message.model_validate(body)

    def signals(self, headers: Mapping[str, str]) -> ProviderSignals:
        return read_signals(headers)

    def status_hint(self, status: int, settings: ClientSettings, api_key_env: str) -> str:
        if status == 404:
            return (
                f" (check base_url={redact_url(settings.base_url)!r}, which has no /v1 (the "
                f"client adds /v1/messages), and model={settings.model!r})"
            )
        return credentials_hint(status, api_key_env)
