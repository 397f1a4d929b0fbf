"""One chat-template renderer: every backend with a tokenizer renders the same prompt."""

from __future__ import annotations

import logging

import pytest

from assay.errors import ConfigError, ModelError
from assay.models.base import MODELS
from assay.models.vllm.model import VLLMLM
from assay.models.vllm.requests import parse_vllm_args
from assay.prompts.chat import TokenizerChatTemplate, render_chat

CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Name a river."},
]
PREFILLED = [*CONVERSATION, {"role": "assistant", "content": "The"}]

# Many instruction templates (Gemma's, Mistral's) reject a system turn.
NO_SYSTEM = (
    "{% for m in messages %}"
    "{% if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    "[{{ m['role'] }}]{{ m['content'] }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}[assistant]{% endif %}"
)


@pytest.fixture(scope="module")
def backends(tiny_model_dir):
    """The hf, vllm and openai-completions backends over the tiny model's tokenizer."""
    from transformers import AutoTokenizer

    hf = MODELS.get("hf")(pretrained=str(tiny_model_dir))
    vllm = VLLMLM(
        parse_vllm_args({"pretrained": str(tiny_model_dir), "max_model_len": 64}),
        engine=object(),  # never called: only prompts are rendered
        tokenizer=AutoTokenizer.from_pretrained(tiny_model_dir),
    )
    api = MODELS.get("openai-completions")(model="tiny", tokenizer=str(tiny_model_dir))
    return {"hf": hf, "vllm": vllm, "openai-completions": api}


def test_every_backend_renders_the_tokenizers_own_template(backends, tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    want = tok.apply_chat_template(CONVERSATION, tokenize=False, add_generation_prompt=True)
    want_prefilled = tok.apply_chat_template(
        PREFILLED, tokenize=False, add_generation_prompt=False, continue_final_message=True
    )
    assert want.endswith("<|assistant|>\n")  # the template really added a generation prompt
    for name, backend in backends.items():
        template = backend.chat_template()
        assert render_chat(template, CONVERSATION) == want, name
        assert render_chat(template, PREFILLED) == want_prefilled, name


def test_a_template_that_refuses_system_turns_is_retried_without_them_everywhere(backends, caplog):
    for name, backend in backends.items():
        tok = backend.tokenizer
        saved, tok.chat_template = tok.chat_template, NO_SYSTEM
        try:
            caplog.clear()
            with caplog.at_level(logging.WARNING):
                prompt = render_chat(backend.chat_template(), CONVERSATION)
        finally:
            tok.chat_template = saved
        assert prompt == "[user]Name a river.[assistant]", name
        assert "without system messages" in caplog.text, name


def test_a_template_error_without_a_system_turn_is_not_hidden(backends):
    import jinja2

    tok = backends["hf"].tokenizer
    saved, tok.chat_template = tok.chat_template, "{{ raise_exception('broken') }}"
    try:
        with pytest.raises(jinja2.exceptions.TemplateError, match="broken"):
            render_chat(backends["hf"].chat_template(), CONVERSATION[1:])
    finally:
        tok.chat_template = saved


def test_a_missing_template_names_the_backend_and_the_fix(backends):
    for name, backend in backends.items():
        tok = backend.tokenizer
        saved, tok.chat_template = tok.chat_template, None
        try:
            with pytest.raises(ModelError, match=f"--model {name}: .*no chat template"):
                render_chat(backend.chat_template(), CONVERSATION)
        finally:
            tok.chat_template = saved


def test_template_options_may_not_set_what_the_renderer_sets():
    with pytest.raises(ValueError, match="add_generation_prompt"):
        TokenizerChatTemplate(object(), "missing", {"add_generation_prompt": False})
    with pytest.raises(ConfigError, match="chat_template_args sets continue_final_message"):
        parse_vllm_args({"pretrained": "m", "chat_template_args": {"continue_final_message": 1}})


def test_template_options_reach_the_template(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.chat_template = "{{ greeting }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
    template = TokenizerChatTemplate(tok, "missing", {"greeting": "Hi! "})
    assert render_chat(template, CONVERSATION[1:]) == "Hi! Name a river."
