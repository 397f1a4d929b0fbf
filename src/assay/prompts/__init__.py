"""Prompts: a doc and its few-shot examples turned into what a model reads (plain text, a chat
template rendered by the one shared renderer, or chat messages for an API)."""

from assay.prompts.chat import ChatTemplate, TokenizerChatTemplate, render_chat
from assay.prompts.manager import PROMPT_LAYOUTS, PromptLayout, PromptManager, Turn

__all__ = [
    "PROMPT_LAYOUTS",
    "ChatTemplate",
    "PromptLayout",
    "PromptManager",
    "TokenizerChatTemplate",
    "Turn",
    "render_chat",
]
