"""Tool calls in the text a local model generates (hf, vllm): the common output formats.

- `hermes` (Hermes, Qwen 2.5/3): each call is `<tool_call>{"name": ..., "arguments": {...}}
  </tool_call>`; the text outside the tags is the answer.
- `llama3` (Llama 3.1-3.3 JSON tool calling): the whole answer is one JSON object
  `{"name": ..., "parameters": {...}}` (or `"arguments"`), optionally after `<|python_tag|>`,
  several separated by `;`.
- `mistral`: `[TOOL_CALLS]` followed by a JSON list of `{"name", "arguments"}`, or (newer
  templates) by `name[ARGS]{...}` per call.

A call that does not parse is recorded as such (`ToolCall.arguments_json` None, the text in
`raw`, the name when it could be read), never guessed. `parser_for_template` picks a parser
from the markers a chat template writes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from assay.requests.tools import ToolCall

Parsed = tuple[str, tuple[ToolCall, ...]]
"""(the answer's text without the calls, the calls in order)."""
Parser = Callable[[str], Parsed]

_HERMES = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)


def _call(text: str, index: int, name_keys: tuple[str, ...] = ("name",)) -> ToolCall:
    """A call from its JSON text ({name, arguments|parameters}); unparseable kept as such."""
    try:
        value: Any = json.loads(text)
    except ValueError:
        match = re.search(r'"name"\s*:\s*"([^"]*)"', text)
        return ToolCall(match.group(1) if match else "", None, text, f"call_{index}")
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return ToolCall("", None, text, f"call_{index}")
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):  # some models write the arguments as a JSON string
        return ToolCall.parsed(value["name"], arguments, raw=text, id=f"call_{index}")
    if not isinstance(arguments, dict):
        return ToolCall(value["name"], None, text, f"call_{index}")
    return ToolCall.parsed(value["name"], arguments, raw=text, id=f"call_{index}")


def hermes(text: str) -> Parsed:
    """Calls in `<tool_call>` tags (an unclosed last tag holds an unfinished call)."""
    calls = tuple(_call(m.group(1).strip(), i) for i, m in enumerate(_HERMES.finditer(text)))
    return _HERMES.sub("", text).strip() if calls else text, calls


def llama3(text: str) -> Parsed:
    """An answer that is JSON calls (after `<|python_tag|>` or alone); any other text is the
    answer with no calls."""
    body = text.strip()
    tagged = body.startswith("<|python_tag|>")
    body = body.removeprefix("<|python_tag|>").strip()
    if not body.startswith("{") and not tagged:
        return text, ()
    decoder = json.JSONDecoder()
    calls: list[ToolCall] = []
    rest = body
    while rest:
        try:
            _, end = decoder.raw_decode(rest)
        except ValueError:
            calls.append(_call(rest, len(calls)))
            break
        calls.append(_call(rest[:end], len(calls)))
        rest = rest[end:].strip().removeprefix(";").strip()
    return "", tuple(calls)


def mistral(text: str) -> Parsed:
    """Calls after `[TOOL_CALLS]`: a JSON list, or `name[ARGS]{...}` per call."""
    head, marker, tail = text.partition("[TOOL_CALLS]")
    if not marker:
        return text, ()
    tail = tail.strip()
    if "[ARGS]" in tail:
        calls = []
        for i, part in enumerate(p for p in tail.split("[TOOL_CALLS]") if p.strip()):
            name, _, arguments = part.partition("[ARGS]")
            try:
                value = json.loads(arguments)
            except ValueError:
                value = None
            if isinstance(value, dict):
                calls.append(ToolCall.parsed(name.strip(), value, raw=part, id=f"call_{i}"))
            else:
                calls.append(ToolCall(name.strip(), None, part, f"call_{i}"))
        return head.strip(), tuple(calls)
    try:
        listed = json.loads(tail)
    except ValueError:
        return head.strip(), (_call(tail, 0),)
    items = listed if isinstance(listed, list) else [listed]
    return head.strip(), tuple(_call(json.dumps(item), i) for i, item in enumerate(items))


PARSERS: dict[str, Parser] = {"hermes": hermes, "llama3": llama3, "mistral": mistral}
"""The `tool_parser=` model arg's values."""


def parser_for_template(template: str | None) -> str | None:
    """The parser a chat template's own tool format calls for, from its markers; None when the
    template shows none (give tool_parser= then)."""
    if not template:
        return None
    if "<tool_call>" in template:
        return "hermes"
    if "[TOOL_CALLS]" in template:
        return "mistral"
    if "<|python_tag|>" in template or "ipython" in template:
        return "llama3"
    return None


__all__ = ["PARSERS", "Parsed", "Parser", "hermes", "llama3", "mistral", "parser_for_template"]
