"""Tools through openai-chat and anthropic-chat (models/api/tool_payloads.py): what is sent
(tools, tool_choice, assistant calls, tool results) and what is read back (the calls, parsed
or kept as written), online and through the batch APIs, against the loopback fakes."""

from __future__ import annotations

import pytest
from fixtures.provider_fakes import FakeProviders

from assay.errors import ModelError
from assay.models.api.anthropic_chat import AnthropicChatLM
from assay.models.api.openai import OpenAIChatLM, OpenAICompletionsLM
from assay.requests.tools import ToolCall, ToolSpec, Turn
from assay.requests.types import GenerateRequest, Generation, GenParams

WEATHER = ToolSpec.of(
    "weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TIME = ToolSpec.of("time", "The time in a city.")


def _calls(body):
    # Call both tools on the first turn (parallel calls); answer in text once results came.
    if any(m.get("role") == "tool" for m in body["messages"]) or any(
        isinstance(m["content"], list) and any(b.get("type") == "tool_result" for b in m["content"])
        for m in body["messages"]
    ):
        return None
    return [("weather", {"city": "Oslo"}), ("time", '{"city": "Oslo"')]


def _first(tool_choice=None):
    return GenerateRequest(
        "Weather and time in Oslo?",
        GenParams(max_gen_toks=50),
        tools=(WEATHER, TIME),
        tool_choice=tool_choice,
    )


def _second(calls):
    turns = (
        Turn("system", "Use tools."),
        Turn("user", "Weather and time in Oslo?"),
        Turn("assistant", "", calls),
        Turn("tool", "sunny", (), calls[0].id, "weather"),
        Turn("tool", "error: arguments did not parse", (), calls[1].id, "time"),
    )
    return GenerateRequest(turns, GenParams(max_gen_toks=50), tools=(WEATHER, TIME))


def test_openai_chat_sends_tools_and_reads_parallel_calls():
    with FakeProviders(calls=_calls) as fake:
        lm = OpenAIChatLM(model="gpt-test", base_url=fake.openai_url, parallel_tool_calls=True)
        (answer,) = lm.generate_until([_first("required")])
        body = fake.bodies[0]
        assert body["tools"] == [
            {"type": "function", "function": WEATHER.as_dict()},
            {"type": "function", "function": TIME.as_dict()},
        ]
        assert body["tool_choice"] == "required" and body["parallel_tool_calls"] is True
        assert isinstance(answer, Generation) and answer.finish_reason == "tool_calls"
        weather, time = answer.tool_calls
        assert (weather.name, weather.arguments, weather.id) == (
            "weather",
            {"city": "Oslo"},
            "call_0",
        )
        # Arguments that do not parse are kept as written, never guessed.
        assert (time.name, time.arguments, time.raw) == ("time", None, '{"city": "Oslo"')

        (final,) = lm.generate_until([_second(answer.tool_calls)])
        messages = fake.bodies[1]["messages"]
        assert messages[2] == {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_0", "type": "function",
                 "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}},
                {"id": "call_1", "type": "function",
                 "function": {"name": "time", "arguments": '{"city": "Oslo"'}},
            ],
        }  # fmt: skip
        assert messages[3] == {"role": "tool", "tool_call_id": "call_0", "content": "sunny"}
        assert final.tool_calls == () and final.finish_reason == "stop"


def test_openai_chat_names_a_forced_tool():
    with FakeProviders(calls=_calls) as fake:
        lm = OpenAIChatLM(model="gpt-test", base_url=fake.openai_url)
        lm.generate_until([_first("weather")])
        assert fake.bodies[0]["tool_choice"] == {
            "type": "function",
            "function": {"name": "weather"},
        }
        assert "parallel_tool_calls" not in fake.bodies[0]


def test_anthropic_chat_sends_tool_use_and_tool_result_blocks():
    with FakeProviders(calls=_calls) as fake:
        lm = AnthropicChatLM(model="claude-test", base_url=fake.anthropic_url)
        (answer,) = lm.generate_until([_first("required")])
        body = fake.bodies[0]
        assert body["tools"] == [
            {"name": "weather", "description": "The weather in a city.",
             "input_schema": WEATHER.parameters},
            {"name": "time", "description": "The time in a city.", "input_schema": TIME.parameters},
        ]  # fmt: skip
        assert body["tool_choice"] == {"type": "any"}
        assert answer.finish_reason == "tool_calls"
        assert [(c.name, c.arguments, c.id) for c in answer.tool_calls] == [
            ("weather", {"city": "Oslo"}, "toolu_0"),
            ("time", {}, "toolu_1"),
        ]
        (final,) = lm.generate_until([_second(answer.tool_calls)])
        body = fake.bodies[1]
        assert body["system"] == "Use tools."
        assert body["messages"][1] == {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_0", "name": "weather", "input": {"city": "Oslo"}},
                {"type": "tool_use", "id": "toolu_1", "name": "time", "input": {}},
            ],
        }
        # Both results in one user turn: Anthropic's turns alternate.
        assert body["messages"][2] == {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_0", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "toolu_1",
                 "content": "error: arguments did not parse"},
            ],
        }  # fmt: skip
        assert len(body["messages"]) == 3 and final.tool_calls == ()


def test_batch_apis_carry_tools_and_read_calls_as_online(tmp_path):
    with FakeProviders(calls=_calls) as fake:
        settings = {"batch_api": True, "batch_poll_interval": 0.01}
        online = OpenAIChatLM(model="gpt-test", base_url=fake.openai_url).generate_until([_first()])
        batched = OpenAIChatLM(
            model="gpt-test", base_url=fake.openai_url, batch_dir=str(tmp_path / "o"), **settings
        ).generate_until([_first()])
        assert batched == online and len(batched[0].tool_calls) == 2
        assert fake.batch_lines[0]["body"]["tools"][0]["function"]["name"] == "weather"
        anthropic = AnthropicChatLM(
            model="claude-test",
            base_url=fake.anthropic_url,
            batch_dir=str(tmp_path / "a"),
            **settings,
        ).generate_until([_first()])
        assert [c.name for c in anthropic[0].tool_calls] == ["weather", "time"]
        assert fake.batch_lines[-1]["params"]["tools"][0]["name"] == "weather"


def test_a_backend_without_tools_refuses_a_conversation():
    call = ToolCall.parsed("weather", {"city": "Oslo"}, id="c")
    request = _second((call, call))
    with pytest.raises(ModelError, match="does not take tool calls"):
        OpenAICompletionsLM(model="m", base_url="http://127.0.0.1:9/v1")._prompt(request)


def test_tool_fields_in_extra_body_are_refused():
    from assay.errors import ConfigError

    with pytest.raises(ConfigError, match="tools"):
        OpenAIChatLM(model="m", extra_body={"tools": []})
    # Without tool settings the identity (hence every cache key) is what it was before tools.
    assert "parallel_tool_calls" not in OpenAIChatLM(model="m").identity()["generation_defaults"]
    tools = OpenAIChatLM(model="m", parallel_tool_calls=False).identity()
    assert tools["generation_defaults"]["parallel_tool_calls"] is False


def test_any_backend_without_tools_refuses_requests_that_offer_them():
    from assay.execution.local import run_requests
    from assay.models.dummy import dummy

    with pytest.raises(ModelError, match="takes no tools"):
        run_requests(dummy(), [_first()])
