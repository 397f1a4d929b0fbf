"""OpenAI-compatible API backends (`--model openai-completions`, `--model openai-chat`)."""

from assay.models.api.backend import APISettings
from assay.models.api.openai import OpenAIChatLM, OpenAICompletionsLM
from assay.models.api.runner import APIRequestError

__all__ = ["APIRequestError", "APISettings", "OpenAIChatLM", "OpenAICompletionsLM"]
