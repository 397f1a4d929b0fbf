"""Tool calls in local models' text (assay/models/tool_parsers.py)."""

from __future__ import annotations

from assay.models.tool_parsers import hermes, llama3, mistral, parser_for_template


def test_hermes_reads_every_tagged_call_and_keeps_the_text():
    text = (
        'Let me look.\n<tool_call>\n{"name": "weather", "arguments": {"city": "Oslo"}}\n'
        '</tool_call>\n<tool_call>\n{"name": "time", "arguments": {"city": "Oslo"}}\n</tool_call>'
    )
    answer, calls = hermes(text)
    assert answer == "Let me look."
    assert [(c.name, c.arguments, c.id) for c in calls] == [
        ("weather", {"city": "Oslo"}, "call_0"),
        ("time", {"city": "Oslo"}, "call_1"),
    ]
    assert hermes("no calls here") == ("no calls here", ())


def test_unparseable_calls_are_recorded_never_guessed():
    _, (broken,) = hermes('<tool_call>{"name": "weather", "arguments": {"city": </tool_call>')
    assert (broken.name, broken.arguments) == ("weather", None)
    assert broken.raw == '{"name": "weather", "arguments": {"city":'
    _, (unclosed,) = hermes('<tool_call>{"name": "weather", "argum')
    assert unclosed.arguments is None and unclosed.raw.startswith('{"name"')
    _, (bad,) = llama3('{"name": "x", "parameters": {"a": 1}')
    assert bad.arguments is None


def test_llama3_json_calls():
    answer, calls = llama3('<|python_tag|>{"name": "add", "parameters": {"a": 1, "b": 2}}; '
                           '{"name": "mul", "parameters": {"a": 3, "b": 3}}')  # fmt: skip
    assert answer == "" and [(c.name, c.arguments) for c in calls] == [
        ("add", {"a": 1, "b": 2}),
        ("mul", {"a": 3, "b": 3}),
    ]
    assert llama3("The answer is 9.") == ("The answer is 9.", ())


def test_mistral_both_layouts():
    _, calls = mistral('[TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}}]')
    assert [(c.name, c.arguments) for c in calls] == [("add", {"a": 1, "b": 2})]
    _, calls = mistral('[TOOL_CALLS]add[ARGS]{"a": 1, "b": 2}[TOOL_CALLS]mul[ARGS]{"a": 3')
    assert [(c.name, c.arguments) for c in calls] == [("add", {"a": 1, "b": 2}), ("mul", None)]
    assert mistral("plain") == ("plain", ())


def test_the_template_names_its_parser():
    assert parser_for_template("{% for tool in tools %}<tool_call>{% endfor %}") == "hermes"
    assert parser_for_template("[TOOL_CALLS] {{ x }}") == "mistral"
    assert parser_for_template("<|start_header_id|>ipython<|end_header_id|>") == "llama3"
    assert parser_for_template("{{ messages }}") is None and parser_for_template(None) is None
