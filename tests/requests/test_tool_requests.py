"""Requests that offer tools: cache keys, cached answers with tool calls, samples arguments."""

from __future__ import annotations

from assay.requests.cache import ResponseCache, _encode, request_key
from assay.requests.instances import Instance
from assay.requests.tools import (
    ToolCall,
    ToolSpec,
    Turn,
    call_from_dict,
    conversation_of,
    conversation_record,
)
from assay.requests.types import GenerateRequest, Generation, GenParams

ADD = ToolSpec.of("add", "Add two numbers.", {"type": "object", "properties": {"a": {}, "b": {}}})
CALL = ToolCall.parsed("add", '{"b": 2, "a": 1}', id="call_0")


def test_requests_without_tools_keep_their_keys():
    # The digests of assay-cache-1 keys written before tools existed (computed then).
    plain = GenerateRequest("2+2=", GenParams(until=("\n",)))
    chat = GenerateRequest((("user", "2+2="),), GenParams(until=("\n",)))
    assert request_key(plain) == _key(["gen", "2+2=", plain.params.as_dict(), 0])
    assert request_key(chat) == _key(["gen", [["user", "2+2="]], chat.params.as_dict(), 0])


def _key(payload):
    import hashlib

    from assay.requests.types import canonical_json

    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def test_tools_choice_and_conversation_turns_change_the_key():
    base = GenerateRequest("q", GenParams())
    with_tools = GenerateRequest("q", GenParams(), tools=(ADD,))
    forced = GenerateRequest("q", GenParams(), tools=(ADD,), tool_choice="add")
    other_schema = GenerateRequest("q", GenParams(), tools=(ToolSpec.of("add", "Add."),))
    turns = (Turn("user", "q"), Turn("assistant", "", (CALL,)), Turn("tool", "3", (), "call_0"))
    later = GenerateRequest(turns, GenParams(), tools=(ADD,))
    other_result = GenerateRequest(
        (*turns[:2], Turn("tool", "4", (), "call_0")), GenParams(), tools=(ADD,)
    )
    keys = {request_key(r) for r in (base, with_tools, forced, other_schema, later, other_result)}
    assert len(keys) == 6
    # Equal values hash equal: a rerun asks for the same key.
    again = GenerateRequest(
        tuple(Turn(t.role, t.content, t.tool_calls, t.tool_call_id) for t in turns),
        GenParams(),
        tools=(
            ToolSpec.of(
                "add", "Add two numbers.", {"properties": {"b": {}, "a": {}}, "type": "object"}
            ),
        ),
    )
    assert request_key(again) == request_key(later)


def test_generations_with_tool_calls_round_trip_through_the_cache(tmp_path):
    unparsed = ToolCall.parsed("add", "{not json", id="call_1")
    assert unparsed.arguments is None and unparsed.raw == "{not json"
    answer = Generation(
        "", finish_reason="tool_calls", answer_tokens=7, tool_calls=(CALL, unparsed)
    )
    cache = ResponseCache(tmp_path / "c.sqlite", {"backend": "x"})
    cache.put_many([("k", answer), ("plain", Generation("hi", finish_reason="stop"))])
    got = cache.get_many(["k", "plain"])
    assert got["k"] == answer
    assert got["plain"] == Generation("hi", finish_reason="stop")
    # An answer without calls is written as before tools existed.
    assert "tool_calls" not in _encode(Generation("hi", finish_reason="stop"))
    cache.close()


def test_samples_arguments_record_the_conversation_and_the_tools():
    turns = (Turn("user", "q"), Turn("assistant", "", (CALL,)), Turn("tool", "3", (), "call_0"))
    args = Instance(0, GenerateRequest(turns, GenParams(), tools=(ADD,))).arguments()
    assert args["arg_0"][1]["tool_calls"][0] == {
        "id": "call_0",
        "name": "add",
        "arguments": {"a": 1, "b": 2},
        "raw": '{"b": 2, "a": 1}',
    }
    assert args["arg_0"][2] == {"role": "tool", "content": "3", "tool_call_id": "call_0"}
    assert args["tools"] == [ADD.as_dict()] and args["tool_choice"] is None
    plain = Instance(0, GenerateRequest((("user", "q"),), GenParams())).arguments()
    assert "tools" not in plain and plain["arg_0"] == [{"role": "user", "content": "q"}]


def test_conversation_helpers():
    assert conversation_of("q") == (Turn("user", "q"),)
    assert conversation_of((("system", "s"), ("user", "q"))) == (
        Turn("system", "s"),
        Turn("user", "q"),
    )
    assert conversation_record("q") == "q"
    assert call_from_dict(CALL.as_dict()) == CALL
