"""`--model vllm` with a reasoning model, on an engine that follows the hand-wired chain of
`fixtures/tiny_thinking_model.py` as vLLM would generate it (token ids up to EOS or max_tokens,
vLLM's finish and stop reasons): the thinking split from the token ids as hf splits it,
`enable_thinking` reaching the chat template, stop strings kept off the engine, and finish
reasons read from vLLM's `CompletionOutput` fields."""

from __future__ import annotations

import pytest
from fixtures.tiny_thinking_model import ANSWER, SUCCESSOR, THINKING, build_tiny_thinking_model

from assay.errors import ConfigError
from assay.models.vllm.model import VLLMLM
from assay.models.vllm.requests import EngineGeneration, parse_vllm_args
from assay.requests.types import GenerateRequest, GenParams


class ChainEngine:
    """Greedy generation of the tiny thinking model: each token's successor, until EOS
    (included in the token ids, as vLLM returns it) or max_tokens."""

    max_model_len = 128
    prefix_block_size = None

    def __init__(self, tokenizer) -> None:
        ids = tokenizer.convert_tokens_to_ids
        self.successor = {ids(a): ids(b) for a, b in SUCCESSOR.items()}
        self.eos = tokenizer.eos_token_id
        self.params: list[dict] = []

    def generate(self, prompts, params, media=None):
        self.params += params
        out = []
        for ids, p in zip(prompts, params, strict=True):
            token, new = ids[-1], []
            while len(new) < p["max_tokens"] and (not new or new[-1] != self.eos):
                token = self.successor.get(token, self.eos)
                new.append(token)
            out.append(EngineGeneration(new, "stop" if new[-1] == self.eos else "length", None))
        return out

    def prefix_cache_counts(self):
        return None


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_thinking_model(tmp_path_factory.mktemp("tiny_think_vllm"))


def backend(model_dir, **args) -> VLLMLM:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    parsed = parse_vllm_args({"pretrained": str(model_dir), **args})
    return VLLMLM(parsed, engine=ChainEngine(tokenizer), tokenizer=tokenizer)


THINKS = {"think_end_token": "</think>", "think_start_token": "<think>"}
ASKED = (("user", "Question: say 3 Answer:"),)
"""A chat the template opens no thinking for unless enable_thinking says so."""


def ask(lm: VLLMLM, max_gen_toks: int):
    params = GenParams(until=("Question:", "7"), max_gen_toks=max_gen_toks)
    return lm.generate_until([GenerateRequest(ASKED, params)])[0]


def test_thinking_enabled_through_the_template_is_kept_apart(model_dir):
    lm = backend(model_dir, enable_thinking=True, **THINKS)
    done = ask(lm, 16)
    assert (done.text, done.reasoning, done.thinking_closed) == ("#### ", " ".join(THINKING), True)
    # "7" is a stop string: it cut the answer here, so a stop string ended it.
    assert done.finish_reason == "stop_sequence"
    assert (done.reasoning_tokens, done.answer_tokens) == (len(THINKING), len(ANSWER))
    # Stop strings apply to the answer only: the engine never sees them.
    assert all("stop" not in p for p in lm.engine.params)
    cut = ask(lm, len(THINKING))
    assert (cut.thinking_closed, cut.finish_reason, cut.answer_tokens) == (False, "length", 0)
    assert str(cut) == ""


def test_thinking_disabled_through_the_template_answers_at_once(model_dir):
    answer = ask(backend(model_dir, enable_thinking=False, **THINKS), 16)
    assert (answer.text, answer.reasoning, answer.thinking_closed) == ("#### ", None, None)
    assert answer.answer_tokens == len(ANSWER)


def test_without_thinking_args_the_stop_strings_go_to_the_engine(model_dir):
    lm = backend(model_dir)
    answer = ask(lm, 16)
    assert lm.engine.params[0]["stop"] == ["Question:", "7"]
    assert answer.thinking_closed is None and answer.finish_reason == "stop_sequence"
    assert "think_end_token" not in lm.identity()
    assert backend(model_dir, **THINKS).identity()["think_end_token"] == "</think>"


@pytest.mark.parametrize(
    ("finish", "stop_reason", "ending"),
    [("stop", None, "stop"), ("stop", 151645, "stop"), ("stop", "\n\n", "stop_sequence"),
     ("length", None, "length"), ("abort", None, None)],
)  # fmt: skip
def test_vllms_finish_and_stop_reasons_become_the_finish_reason(finish, stop_reason, ending):
    assert EngineGeneration([1], finish, stop_reason).ending() == ending


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({"enable_thinking": True}, "enable_thinking=true needs think_end_token"),
        ({"think_start_token": "<think>"}, "think_start_token=<think> needs think_end_token"),
        (
            {"enable_thinking": False, "chat_template_args": {"enable_thinking": True}},
            "enable_thinking is given both",
        ),
    ],
)
def test_thinking_args_that_cannot_be_honoured_are_refused(args, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_vllm_args({"pretrained": "m", **args})
