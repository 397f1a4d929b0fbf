"""Anthropic's SDK as a `provider.Provider`: the official `anthropic` client, its Message
Batches API and its usage fields (cache reads and writes apart from `input_tokens`)."""

from __future__ import annotations

from typing import Any

from assay.models.api.anthropic_messages import anthropic_usage
from assay.models.api.batch_providers import ANTHROPIC_LIMITS, AnthropicBatches
from assay.models.api.batches import BatchLimits, BatchProvider
from assay.models.api.provider import ClientSettings, SDKProvider, credentials_hint
from assay.models.api.usage import Usage
from assay.util.redact import clean_text, redact_url


class AnthropicProvider(SDKProvider):
    """The `anthropic` package: clients, /v1/messages/batches, usage and typed messages."""

    package = "anthropic"
    backend = "anthropic-chat"
    client_class = "Anthropic"
    takes_default_query = False  # the Messages API needs none
    batch_limits = ANTHROPIC_LIMITS

    def batch_provider(
        self, client: Any, base_url: str, endpoint: str, limits: BatchLimits
    ) -> BatchProvider:
        # One batch endpoint for every request: /v1/messages/batches takes no endpoint.
        return AnthropicBatches(client, self.sdk(self.backend), base_url, clean_text, limits)

    def usage(self, usage: Any) -> Usage:
        return anthropic_usage(usage)

    def typed_answer(self, body: dict[str, Any], endpoint: str) -> Any:
        return self.sdk(self.backend).types.Message.model_validate(body)

    def status_hint(self, status: int, settings: ClientSettings, api_key_env: str) -> str:
        if status == 404:
            return (
                f" (check base_url={redact_url(settings.base_url)!r}, which has no /v1 (the "
                f"client adds /v1/messages), and model={settings.model!r})"
            )
        return credentials_hint(status, api_key_env)
