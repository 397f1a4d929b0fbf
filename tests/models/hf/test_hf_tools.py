"""Tools on `--model hf`: the chat template's own tool support renders the conversation, and
calls are read from the generated text by the template's parser (a tiny model whose
template writes Hermes-style `<tool_call>` tags)."""

from __future__ import annotations

import json
import shutil

import pytest

from assay.errors import ModelError
from assay.models.hf.model import hf
from assay.requests.tools import ToolCall, ToolSpec, Turn
from assay.requests.types import GenerateRequest, Generation, GenParams

TOOL_TEMPLATE = (
    "{{ bos_token }}{% if tools %}<|system|>\nTools:{% for tool in tools %}\n"
    "{{ tool | tojson }}{% endfor %}\nCall one as <tool_call>{json}</tool_call>\n{% endif %}"
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}"
    "{% for call in message.get('tool_calls', []) %}<tool_call>{\"name\": "
    '"{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}'
    "</tool_call>{% endfor %}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
ADD = ToolSpec.of("add", "Add two numbers.", {"type": "object", "properties": {"a": {}, "b": {}}})


@pytest.fixture(scope="module")
def tool_model_dir(tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny_tools")
    shutil.copytree(tiny_model_dir, folder, dirs_exist_ok=True)
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = TOOL_TEMPLATE
    config_path.write_text(json.dumps(config))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    return folder


def _conversation():
    call = ToolCall.parsed("add", {"a": 1, "b": 2}, id="call_0")
    return (
        Turn("user", "What is 1 + 2?"),
        Turn("assistant", "", (call,)),
        Turn("tool", "3", (), "call_0", "add"),
    )


def test_the_template_renders_tools_calls_and_results(tool_model_dir):
    lm = hf(pretrained=str(tool_model_dir), device="cpu")
    request = GenerateRequest(_conversation(), GenParams(max_gen_toks=4), tools=(ADD,))
    prompt = lm._tool_prompt(request)
    assert '"name": "add"' in prompt and "Add two numbers." in prompt
    assert '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>' in prompt
    assert prompt.endswith(
        "<|tool|>\n3<|assistant|>\n"
    )  # jinja trim_blocks, as transformers sets it
    (answer,) = lm.generate_until([request])
    assert isinstance(answer, Generation)  # a random model: text, most likely no call


def test_calls_are_read_from_the_generated_text(tool_model_dir):
    lm = hf(pretrained=str(tool_model_dir), device="cpu")
    read = lm._read_calls(
        Generation('ok<tool_call>{"name": "add", "arguments": {"a": 5}}</tool_call>')
    )
    assert read.text == "ok" and read.finish_reason == "tool_calls"
    assert read.tool_calls[0].arguments == {"a": 5}
    broken = lm._read_calls(Generation('<tool_call>{"name": "add", "argu'))
    assert broken.tool_calls[0].arguments is None  # recorded as unparseable, not guessed
    assert lm._read_calls(Generation("plain")) == Generation("plain")


def test_a_template_without_a_tool_format_needs_a_parser(tiny_model_dir):
    lm = hf(pretrained=str(tiny_model_dir), device="cpu")
    request = GenerateRequest("q", GenParams(max_gen_toks=4), tools=(ADD,))
    with pytest.raises(ModelError, match="tool_parser="):
        lm.generate_until([request])
    chosen = hf(pretrained=str(tiny_model_dir), device="cpu", tool_parser="llama3")
    assert chosen.identity()["tool_parser"] == "llama3"
    (answer,) = chosen.generate_until([request])
    assert isinstance(answer, Generation)
