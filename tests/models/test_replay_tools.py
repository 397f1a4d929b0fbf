"""replay with tool calls: recorded calls come back as `Generation.tool_calls`, malformed
arguments stay unparsed, conversations match by their messages, and the response cache keeps
the calls."""

from __future__ import annotations

import json

import pytest

from assay.errors import ConfigError, ModelError
from assay.models.base import MODELS
from assay.requests.cache import ResponseCache, request_key
from assay.requests.tools import ToolSpec, Turn
from assay.requests.types import GenerateRequest, Generation

WEATHER = ToolSpec.of("get_weather", "Weather of a city", {"type": "object", "properties": {}})


def replay(tmp_path, *lines):
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return MODELS.get("replay")(path=str(path))


def conversation(*turns):
    return tuple(Turn(role, content) for role, content in turns)


def test_recorded_calls_come_back_in_order_with_malformed_arguments_kept_raw(tmp_path):
    lm = replay(
        tmp_path,
        {
            "prompt": "Weather?",
            "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "Paris"}, "id": "c1"},
                {"name": "get_weather", "arguments": '{"city": "Rome"'},
            ],
        },
    )
    assert lm.accepts_tools
    (out,) = lm.generate_until(
        [GenerateRequest(conversation(("user", "Weather?")), tools=(WEATHER,))]
    )
    assert isinstance(out, Generation) and out.text == ""
    first, second = out.tool_calls
    assert (first.name, first.arguments, first.id) == ("get_weather", {"city": "Paris"}, "c1")
    assert second.arguments is None and second.raw == '{"city": "Rome"'


def test_a_conversation_matches_its_whole_messages_before_its_last_user_message(tmp_path):
    exact = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]
    lm = replay(
        tmp_path,
        {"prompt": exact, "response": "exact"},
        {"prompt": "Q", "response": "by last user message"},
    )
    asked = [
        GenerateRequest(conversation(("system", "S"), ("user", "Q"))),
        GenerateRequest(conversation(("system", "other"), ("user", "Q"))),
    ]
    assert lm.generate_until(asked) == ["exact", "by last user message"]


def test_calls_for_a_request_without_tools_are_refused(tmp_path):
    lm = replay(tmp_path, {"prompt": "Q", "tool_calls": [{"name": "f", "arguments": {}}]})
    with pytest.raises(ModelError, match="offer no tools"):
        lm.generate_until([GenerateRequest("Q")])


@pytest.mark.parametrize(
    "line",
    [
        {"prompt": "Q", "tool_calls": {"name": "f"}},
        {"prompt": "Q", "tool_calls": [{"name": 3, "arguments": {}}]},
        {"prompt": "Q", "tool_calls": [{"name": "f", "arguments": [1, 2]}]},
        {"prompt": "Q", "tool_calls": [{"name": "f", "arguments": {}, "id": 7}]},
    ],
)
def test_bad_tool_calls_are_refused_by_line(tmp_path, line):
    with pytest.raises(ConfigError, match=r"r\.jsonl:1.*tool_calls"):
        replay(tmp_path, line)


def test_a_prompt_that_is_neither_text_nor_messages_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"r\.jsonl:1.*list of \{'role', 'content'\}"):
        replay(tmp_path, {"prompt": [{"role": "user"}], "response": "x"})


def test_the_cache_keeps_tool_calls_and_keys_on_the_tools(tmp_path):
    lm = replay(
        tmp_path,
        {"prompt": "Q", "response": "", "tool_calls": [{"name": "f", "arguments": "{bad"}]},
    )
    request = GenerateRequest(conversation(("user", "Q")), tools=(WEATHER,))
    (answer,) = lm.generate_until([request])
    cache = ResponseCache(tmp_path / "c.sqlite", lm.identity())
    key = request_key(request)
    cache.put_many([(key, answer)])
    assert cache.get_many([key])[key] == answer
    other_tools = GenerateRequest(request.prompt, tools=(ToolSpec.of("g"),))
    assert request_key(other_tools) != key
    assert request_key(GenerateRequest("Q")) == request_key(GenerateRequest("Q", tools=()))
    cache.close()


def test_a_line_naming_its_tools_answers_only_requests_offering_them(tmp_path):
    messages = [{"role": "user", "content": "Q"}]
    lm = replay(
        tmp_path,
        {"prompt": messages, "tools": ["get_weather"], "response": "with weather"},
        {"prompt": messages, "response": "any tools"},
    )
    prompt = conversation(("user", "Q"))
    asked = [
        GenerateRequest(prompt, tools=(WEATHER,)),
        GenerateRequest(prompt, tools=(ToolSpec.of("other"),)),
        GenerateRequest(prompt),
    ]
    assert [str(a) for a in lm.generate_until(asked)] == ["with weather", "any tools", "any tools"]
    with pytest.raises(ConfigError, match=r"r\.jsonl:1.*'tools'"):
        replay(tmp_path, {"prompt": "Q", "tools": "get_weather", "response": "x"})


def test_arguments_nested_past_the_parsers_depth_are_kept_unparsed(tmp_path):
    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    lm = replay(tmp_path, {"prompt": "Q", "tool_calls": [{"name": "f", "arguments": deep}]})
    (out,) = lm.generate_until([GenerateRequest(conversation(("user", "Q")), tools=(WEATHER,))])
    (call,) = out.tool_calls
    assert call.arguments is None and call.raw == deep
