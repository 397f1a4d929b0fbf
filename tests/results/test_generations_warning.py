"""The truncation warning says what was scored and advises what the running backend has."""

from __future__ import annotations

from assay.requests.types import GenerateRequest, Generation, GenParams
from assay.results.generations import GenerationTally

REQUEST = GenerateRequest("Q", GenParams(max_gen_toks=16))


def tally(*generations: Generation, policy: str = "empty") -> GenerationTally:
    out = GenerationTally(policy)
    for generation in generations:
        out.add(generation, REQUEST)
    return out


def test_a_plain_model_cut_by_the_cap_is_not_said_to_score_empty_answers():
    plain = tally(
        Generation("#### 4 and", finish_reason="length"), Generation("#### 5", finish_reason="stop")
    )
    notice = plain.warning("t", ("thinking_budget", "reasoning_effort"))
    assert notice is not None
    assert "50.0% of generations (1 of 2) hit the token cap (1 scored on an answer cut short)" in (
        notice
    )
    assert "empty" not in notice and "still thinking" not in notice
    assert "think less" not in notice  # nothing was left thinking
    assert "max_gen_toks in force: 16" in notice


def test_unclosed_thinking_names_the_policy_and_only_the_backends_own_controls():
    thinking = tally(
        Generation("", finish_reason="length", thinking_closed=False),
        Generation("#### 5", thinking_closed=True),
    )
    on_hf = thinking.warning("t")
    assert on_hf is not None
    assert "(1 while still thinking)" in on_hf
    assert "50.0% (1 of 2) ended while still thinking, scored as empty answers" in on_hf
    assert "thinking_budget" not in on_hf and "reasoning_effort" not in on_hf
    on_api = thinking.warning("t", ("thinking_budget", "reasoning_effort"))
    assert on_api is not None and "think less (thinking_budget, reasoning_effort)" in on_api
    kept = tally(Generation("", finish_reason="length", thinking_closed=False), policy="keep")
    assert "scored on their unfinished thought" in (kept.warning("t") or "")


def test_backends_name_the_args_that_make_them_think_less():
    from assay.models.api.anthropic_chat import AnthropicChatLM
    from assay.models.api.openai import OpenAIChatLM, OpenAICompletionsLM
    from assay.models.hf.model import HuggingFaceLM

    assert OpenAIChatLM.thinking_controls == ("thinking_budget", "reasoning_effort")
    assert OpenAICompletionsLM.thinking_controls == ("thinking_budget", "reasoning_effort")
    assert AnthropicChatLM.thinking_controls == ("thinking_budget",)
    assert HuggingFaceLM.thinking_controls == ()
