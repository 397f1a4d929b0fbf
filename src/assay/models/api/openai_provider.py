"""OpenAI's SDK as a `provider.Provider`: the official `openai` client, for OpenAI and every
server that speaks its API (vLLM, llama.cpp, `transformers serve`, gateways)."""

from __future__ import annotations

from typing import Any

from assay.models.api.batch_providers import OPENAI_LIMITS, OpenAIBatches
from assay.models.api.batches import BatchLimits, BatchProvider
from assay.models.api.provider import ClientSettings, SDKProvider, credentials_hint
from assay.models.api.usage import Usage, openai_usage
from assay.util.redact import clean_text, redact_url


class OpenAIProvider(SDKProvider):
    """The `openai` package: clients, batches (/files + /batches), usage and answers."""

    package = "openai"
    backend = "openai-chat"
    client_class = "OpenAI"
    batch_limits = OPENAI_LIMITS

    def batch_provider(
        self, client: Any, base_url: str, endpoint: str, limits: BatchLimits
    ) -> BatchProvider:
        return OpenAIBatches(client, self.sdk(self.backend), base_url, endpoint, clean_text, limits)

    def usage(self, usage: Any) -> Usage:
        return openai_usage(usage)

    def typed_answer(self, body: dict[str, Any], endpoint: str) -> Any:
        if endpoint.endswith("/chat/completions"):
            from openai.types.chat import ChatCompletion

            return ChatCompletion.model_validate(body)
        from openai.types import Completion

        return Completion.model_validate(body)

    def status_hint(self, status: int, settings: ClientSettings, api_key_env: str) -> str:
        if status == 404:
            return (
                f" (check base_url={redact_url(settings.base_url)!r}, which usually ends in /v1, "
                f"and model={settings.model!r})"
            )
        return credentials_hint(status, api_key_env)
