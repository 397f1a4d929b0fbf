"""OpenAI-compatible API backends (`--model openai-completions`, `--model openai-chat`)."""

from assay.models.api.openai import OpenAIChatLM, OpenAICompletionsLM
from assay.models.api.runner import APIRequestError
from assay.models.api.settings import APISettings

__all__ = ["APIRequestError", "APISettings", "OpenAIChatLM", "OpenAICompletionsLM"]
