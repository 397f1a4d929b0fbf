"""anthropic-chat (assay/models/api/anthropic_chat.py, anthropic_messages.py): request shape,
answer reading, and a loopback fake of the Messages API (fixtures/provider_fakes.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from fixtures.provider_fakes import FakeProviders

from assay.errors import ConfigError, ModelError
from assay.images import DocImage
from assay.models.api.anthropic_chat import AnthropicChatLM
from assay.models.api.anthropic_messages import (
    image_block,
    read_message,
    split_system,
    stop_sequences,
)
from assay.models.api.runner import APIRequestError
from assay.models.base import MODELS
from assay.requests.types import GenerateRequest, Generation, GenParams, LoglikelihoodRequest


def test_registered_under_its_name():
    assert MODELS.get("anthropic-chat") is AnthropicChatLM


def test_system_turns_go_apart_and_images_become_base64_blocks():
    from PIL import Image

    image = DocImage(Image.new("RGB", (2, 2), "red"))
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is "},
                {"type": "image_url", "image_url": {"url": image}},
                {"type": "text", "text": ""},
            ],
        },
    ]
    system, turns = split_system(messages)
    assert system == "Be brief."
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    text, picture = turns[2]["content"]  # the empty text part is dropped
    assert text == {"type": "text", "text": "What is "}
    assert picture["source"]["type"] == "base64" and picture["source"]["media_type"] == "image/png"
    assert image_block("https://x/y.jpg") == {
        "type": "image",
        "source": {"type": "url", "url": "https://x/y.jpg"},
    }


def test_whitespace_stop_sequences_are_not_sent():
    assert stop_sequences(["\n\n", "Q:", " ", "A:"], limit=1) == ["Q:"]


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [("end_turn", "stop"), ("max_tokens", "length"), ("stop_sequence", "stop_sequence"),
     ("refusal", None)],
)  # fmt: skip
def test_stop_reason_becomes_the_finish_reason(stop_reason, finish):
    message = SimpleNamespace(
        content=[SimpleNamespace(type="text", text="4")], stop_reason=stop_reason, usage=None
    )
    assert read_message(message).finish_reason == finish


def test_thinking_cut_by_max_tokens_never_closed():
    thought = SimpleNamespace(type="thinking", thinking="hmm")
    cut = read_message(SimpleNamespace(content=[thought], stop_reason="max_tokens", usage=None))
    assert (cut.text, cut.reasoning, cut.thinking_closed) == ("", "hmm", False)


def test_thinking_budget_below_anthropics_minimum_is_refused():
    with pytest.raises(ConfigError, match=r"thinking_budget=.* at least 1024"):
        AnthropicChatLM(model="claude", thinking_budget=100)


def test_loglikelihood_is_refused_naming_the_reason():
    with pytest.raises(ModelError, match="no log-probabilities"):
        AnthropicChatLM(model="claude").loglikelihood([LoglikelihoodRequest("a", "b")])


@pytest.fixture
def fake():
    with FakeProviders() as server:
        yield server


def _lm(fake, **args):
    return AnthropicChatLM(model="claude-test", base_url=fake.anthropic_url, **args)


def test_text_system_prompt_and_turns_reach_the_messages_api(fake):
    conversation = (("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello"),
                    ("user", "2+2?"))  # fmt: skip
    request = GenerateRequest(conversation, GenParams(max_gen_toks=20, temperature=0.0))
    (answer,) = _lm(fake).generate_until([request])
    assert isinstance(answer, Generation)
    assert (answer.text, answer.finish_reason, answer.reasoning) == ("answer: 2+2?", "stop", None)
    (body,) = fake.bodies
    assert body["system"] == "Be brief."
    assert body["messages"] == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "2+2?"},
    ]
    assert body["max_tokens"] == 20 and body["temperature"] == 0.0
    assert "seed" not in body and "stop_sequences" not in body


def test_stop_sequences_end_the_answer(fake):
    request = GenerateRequest("one. two", GenParams(until=(".", "\n\n"), max_gen_toks=20))
    (answer,) = _lm(fake).generate_until([request])
    assert (answer.text, answer.finish_reason) == ("answer: one", "stop_sequence")
    assert fake.bodies[0]["stop_sequences"] == ["."]


def test_max_tokens_gives_finish_reason_length(fake):
    request = GenerateRequest("a b c d e f", GenParams(max_gen_toks=3))
    (answer,) = _lm(fake).generate_until([request])
    assert (answer.text, answer.finish_reason) == ("answer: a b", "length")


def test_thinking_blocks_are_kept_apart_from_the_answer(fake):
    request = GenerateRequest("why?", GenParams(max_gen_toks=10, temperature=0.0))
    (answer,) = _lm(fake, thinking_budget=2048).generate_until([request])
    assert answer.text == "answer: why?"
    assert answer.reasoning == "thinking about why?" and answer.thinking_closed is True
    body = fake.bodies[0]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    # The answer keeps its 10 tokens; Anthropic's thinking refuses a temperature.
    assert body["max_tokens"] == 2058 and "temperature" not in body


def test_overloaded_is_retried_and_a_bad_request_is_not(fake):
    lm = _lm(fake, max_retries=2)
    fake.fail_next = [529, 500]
    (answer,) = lm.generate_until([GenerateRequest("x", GenParams(max_gen_toks=5))])
    assert answer.text == "answer: x" and len(fake.bodies) == 3
    fake.fail_next = [400]
    with pytest.raises(APIRequestError) as err:
        lm.generate_until([GenerateRequest("y", GenParams(max_gen_toks=5))])
    assert "HTTP 400" in str(err.value) and err.value.failures.keys() == {0}
    assert len(fake.bodies) == 4  # not repeated


def test_run_evals_configs_naming_anthropic_go_through_the_native_backend(fake, monkeypatch):
    from assay.pipelines.configs.api_models import RFAPIModelConfig

    native = RFAPIModelConfig(
        client_config={"max_retries": 1},
        endpoint_config={"provider": "anthropic", "endpoint": {"model": "claude-x"}},
        model_config={"max_completion_tokens": 7, "stop": "END", "temperature": 0.2},
        itpm_limit=800,
        otpm_limit=160,
    )
    assert native.backend == "anthropic-chat"
    assert native.model_args() == {"max_retries": 1, "model": "claude-x", "itpm": 800,
                                   "otpm": 160}  # fmt: skip
    # A config naming a base URL (a gateway) speaks the OpenAI API to it, as before.
    gateway = RFAPIModelConfig(
        endpoint_config={
            "provider": "anthropic",
            "api_base_url": "http://gw/v1",
            "endpoint": {"model": "claude-x"},
        }
    )
    assert gateway.backend == "openai-chat"
    # The config's OpenAI-shaped fields reach the Messages API under Anthropic's names.
    lm = AnthropicChatLM(**native.model_args(), base_url=fake.anthropic_url)
    (answer,) = lm.generate_until([GenerateRequest("go END now", native.gen_params())])
    assert answer.text == "answer: go "
    body = fake.bodies[0]
    assert (body["max_tokens"], body["stop_sequences"], body["temperature"]) == (7, ["END"], 0.2)
    assert "max_completion_tokens" not in body and "stop" not in body


def test_usage_is_read_in_anthropics_shape(fake):
    lm = _lm(fake, price_in=3.0, price_out=15.0)
    lm.generate_until([GenerateRequest("a b", GenParams(max_gen_toks=9))])
    stats = lm.usage_stats()
    # The fake reports 5 input tokens and one output token per answer word ("answer: a b").
    assert (stats["requests"], stats["input_tokens"], stats["output_tokens"]) == (1, 5, 3)
    assert stats["cost_usd"] == pytest.approx((5 * 3.0 + 3 * 15.0) / 1e6)
