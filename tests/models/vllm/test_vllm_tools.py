"""Tools on `--model vllm`: the chat template's own tool support renders the conversation
(the same prompt text as the hf backend), and calls are read from the generated text by the
same parsers, on an engine that plays back scripted token ids (no vLLM needed here; the real
engine runs in test_vllm_cpu.py)."""

from __future__ import annotations

import json
import shutil

import pytest

from assay.errors import ModelError
from assay.models.hf.model import hf
from assay.models.vllm.model import VLLMLM
from assay.models.vllm.requests import EngineGeneration, parse_vllm_args
from assay.requests.tools import ToolCall, ToolSpec, Turn
from assay.requests.types import GenerateRequest, GenParams

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


class ScriptedEngine:
    """Answers every prompt with the token ids of the next scripted text."""

    prefix_block_size = None
    max_model_len = 512

    def __init__(self, tokenizer, texts: list[str]) -> None:
        self.tokenizer, self.texts = tokenizer, list(texts)
        self.prompts: list[list[int]] = []

    def generate(self, prompts, params, media=None):
        self.prompts += prompts
        out = []
        for _ in prompts:
            ids = self.tokenizer.encode(self.texts.pop(0), add_special_tokens=False)
            out.append(EngineGeneration(ids, "stop", None))
        return out

    def prefix_cache_counts(self):
        return None


@pytest.fixture(scope="module")
def tool_model_dir(tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny_tools_vllm")
    shutil.copytree(tiny_model_dir, folder, dirs_exist_ok=True)
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = TOOL_TEMPLATE
    config_path.write_text(json.dumps(config))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    return folder


def _vllm(model_dir, texts: list[str], **model_args) -> tuple[VLLMLM, ScriptedEngine]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    engine = ScriptedEngine(tokenizer, texts)
    args = parse_vllm_args({"pretrained": str(model_dir), **model_args})
    return VLLMLM(args, engine=engine, tokenizer=tokenizer), engine


def _request() -> GenerateRequest:
    call = ToolCall.parsed("add", {"a": 1, "b": 2}, id="call_0")
    conversation = (
        Turn("user", "What is 1 + 2?"),
        Turn("assistant", "", (call,)),
        Turn("tool", "3", (), "call_0", "add"),
    )
    return GenerateRequest(conversation, GenParams(max_gen_toks=32), tools=(ADD,))


def test_the_prompt_is_the_templates_own_as_on_the_hf_backend(tool_model_dir):
    lm, engine = _vllm(tool_model_dir, ["3"])
    request = _request()
    lm.generate_until([request])
    expected = hf(pretrained=str(tool_model_dir), device="cpu")._tool_prompt(request)
    assert '"name": "add"' in expected and "<|tool|>\n3" in expected
    assert engine.prompts == [lm._view.encode_prompts([expected], lm.max_length - 32)[0]]


def test_calls_are_read_with_the_templates_parser_and_broken_ones_kept(tool_model_dir):
    lm, _ = _vllm(
        tool_model_dir,
        [
            'ok <tool_call>{"name": "add", "arguments": {"a": 5, "b": 6}}</tool_call>',
            '<tool_call>{"name": "add", "argu',
            "plain answer",
        ],
    )
    requests = [_request(), _request(), _request()]
    called, broken, plain = lm.generate_until(requests)
    assert called.text == "ok" and called.finish_reason == "tool_calls"
    assert [(c.name, c.arguments) for c in called.tool_calls] == [("add", {"a": 5, "b": 6})]
    assert broken.tool_calls[0].name == "add" and broken.tool_calls[0].arguments is None
    assert broken.tool_calls[0].raw == '{"name": "add", "argu'  # as written, not guessed
    assert plain.text == "plain answer" and plain.tool_calls == ()


def test_a_template_without_a_tool_format_needs_a_parser(tiny_model_dir):
    lm, engine = _vllm(tiny_model_dir, ['{"name": "add", "parameters": {"a": 1}}'])
    request = GenerateRequest("q", GenParams(max_gen_toks=32), tools=(ADD,))
    with pytest.raises(ModelError, match=r"--model vllm: .*tool_parser="):
        lm.generate_until([request])
    assert engine.prompts == []  # refused before any compute
    chosen, _ = _vllm(
        tiny_model_dir, ['{"name": "add", "parameters": {"a": 1}}'], tool_parser="llama3"
    )
    assert chosen.identity()["tool_parser"] == "llama3"
    assert "tool_parser" not in lm.identity()  # caches of runs without it keep their keys
    (answer,) = chosen.generate_until([request])
    assert [(c.name, c.arguments) for c in answer.tool_calls] == [("add", {"a": 1})]


def test_requests_without_tools_are_untouched(tool_model_dir):
    lm, _ = _vllm(tool_model_dir, ['<tool_call>{"name": "add"}</tool_call>'])
    (answer,) = lm.generate_until([GenerateRequest("q", GenParams(max_gen_toks=32))])
    assert answer.tool_calls == () and "<tool_call>" in answer.text
