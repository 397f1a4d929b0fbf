"""Tools on local models (hf, vllm): the chat template's own tool support renders the
conversation and the tools, and a parser (`models.tool_parsers`) reads the calls from the
generated text.

The parser is the model arg `tool_parser` (hermes, llama3, mistral), else the one the chat
template's markers call for; a template that shows none is refused before any compute,
asking for `tool_parser=`. A call that does not parse is recorded as such, never guessed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from assay.errors import ModelError
from assay.models.tool_parsers import PARSERS, Parser, parser_for_template
from assay.prompts.chat import TokenizerChatTemplate
from assay.requests.tools import conversation_of, template_messages
from assay.requests.types import GenerateRequest, Generation


def tool_parser(chosen: str | None, tokenizer: Any, backend: str) -> Parser:
    """The parser of `chosen` (the tool_parser model arg), else the template's own."""
    name = chosen or parser_for_template(getattr(tokenizer, "chat_template", None))
    if name is None:
        raise ModelError(
            f"--model {backend}: the chat template shows no tool-call format assay can read; "
            "give tool_parser=hermes|llama3|mistral in --model-args (the format the model "
            "writes its calls in)."
        )
    return PARSERS[name]


def tool_prompt(
    request: GenerateRequest, template: TokenizerChatTemplate, chosen: str | None, backend: str
) -> str:
    """A conversation with tools as prompt text, through the chat template's tool support
    (`apply_chat_template(tools=...)`); the parser is checked first, so a template whose
    calls cannot be read fails before any compute."""
    tokenizer = template.tokenizer
    if not getattr(tokenizer, "chat_template", None):
        raise ModelError(template.missing)
    tool_parser(chosen, tokenizer, backend)
    return str(
        tokenizer.apply_chat_template(
            template_messages(conversation_of(request.prompt)),
            tools=[{"type": "function", "function": s.as_dict()} for s in request.tools] or None,
            add_generation_prompt=True,
            tokenize=False,
            **template.template_args,
        )
    )


def read_calls(generation: Generation, parser: Parser) -> Generation:
    """The calls in a generation's answer, taken out of its text (finish reason
    `tool_calls`); the generation unchanged when it calls nothing."""
    text, calls = parser(generation.text)
    if not calls:
        return generation
    return replace(generation, text=text, tool_calls=calls, finish_reason="tool_calls")
