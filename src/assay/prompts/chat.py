"""Chat templates: the one renderer every backend uses to turn messages into a prompt string.

`--apply-chat-template` must build the same prompt whichever backend serves the model, so the
rules live here once, not in each backend:

- the template is the tokenizer's own (`tokenizer.apply_chat_template(..., tokenize=False)`);
- a final assistant message is a prefix the model continues (lm-eval's `gen_prefix`): the
  template gets `continue_final_message=True` and no generation prompt;
- as lm-eval's HF backend does, a template that rejects the conversation (many refuse a system
  turn) is tried once more without its system messages, with a warning.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from assay.errors import ModelError

log = logging.getLogger(__name__)

Message = Mapping[str, str]
"""One chat message: {"role": "system" | "user" | "assistant", "content": text}."""

Turns = Sequence[tuple[str, str]]
"""A chat prompt as (role, content) pairs, the form requests carry (`requests.Messages`)."""

RESERVED_TEMPLATE_ARGS = frozenset({"tokenize", "add_generation_prompt", "continue_final_message"})
"""Arguments of `apply_chat_template` the renderer sets itself; template options may not."""


class ChatTemplate(Protocol):
    """Renders chat messages as the prompt text a model reads."""

    def __call__(
        self,
        messages: Sequence[Message],
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
    ) -> str:
        """The conversation as text; with `add_generation_prompt`, followed by the opening of
        the assistant's turn; with `continue_final_message`, ending inside the last message."""
        ...


def as_messages(turns: Turns) -> list[dict[str, str]]:
    """(role, content) pairs as chat messages."""
    return [{"role": role, "content": content} for role, content in turns]


def render_chat(template: ChatTemplate, messages: Sequence[Message]) -> str:
    """`messages` through `template`; a final assistant message is continued, not answered."""
    prefill = bool(messages) and messages[-1]["role"] == "assistant"
    return template(messages, add_generation_prompt=not prefill, continue_final_message=prefill)


class TokenizerChatTemplate:
    """The chat template of a transformers tokenizer, rendered as text.

    Args:
        tokenizer: a transformers tokenizer (anything with `chat_template` and
            `apply_chat_template`).
        missing: the error message when the tokenizer has no template (say which backend and
            model, and the fix).
        template_args: further keyword arguments of the template (e.g. `enable_thinking`);
            they may not set the arguments the renderer sets itself (RESERVED_TEMPLATE_ARGS).
    """

    def __init__(
        self, tokenizer: Any, missing: str, template_args: Mapping[str, Any] | None = None
    ) -> None:
        reserved = sorted(RESERVED_TEMPLATE_ARGS & set(template_args or {}))
        if reserved:
            raise ValueError(f"chat template arguments may not set {', '.join(reserved)}")
        self.tokenizer = tokenizer
        self.missing = missing
        self.template_args = dict(template_args or {})

    def __call__(
        self,
        messages: Sequence[Message],
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
    ) -> str:
        if not getattr(self.tokenizer, "chat_template", None):
            raise ModelError(self.missing)
        import jinja2

        kwargs = {
            "tokenize": False,
            "add_generation_prompt": add_generation_prompt,
            "continue_final_message": continue_final_message,
            **self.template_args,
        }
        try:
            return str(self.tokenizer.apply_chat_template(list(messages), **kwargs))
        except jinja2.exceptions.TemplateError:
            kept = [m for m in messages if m.get("role") != "system"]
            if len(kept) == len(messages):
                raise
            log.warning("chat template failed; retrying without system messages")
            return str(self.tokenizer.apply_chat_template(kept, **kwargs))


def template_sha256(tokenizer: Any) -> str | None:
    """sha256 of a tokenizer's chat template source (None when it has no template): two runs
    with the same hash rendered chat prompts with the same template."""
    template = getattr(tokenizer, "chat_template", None)
    if not isinstance(template, str):
        return None
    return hashlib.sha256(template.encode()).hexdigest()
