"""replay backend: answers by prompt, stop strings, clear errors for missing prompts."""

from __future__ import annotations

import json

import pytest

from assay.errors import ConfigError, ModelError
from assay.models.base import MODELS
from assay.requests.types import GenerateRequest, GenParams, LoglikelihoodRequest


def responses(tmp_path, pairs):
    path = tmp_path / "r.jsonl"
    path.write_text(
        "".join(json.dumps({"prompt": p, "response": r}) + "\n" for p, r in pairs) + "\n",
        encoding="utf-8",
    )
    return path


def test_answers_by_prompt_and_cuts_at_stop_strings(tmp_path):
    lm = MODELS.get("replay")(path=str(responses(tmp_path, [("Q1", "A1\nmore"), ("Q2", "A2")])))
    out = lm.generate_until(
        [GenerateRequest("Q2"), GenerateRequest("Q1", GenParams(until=("\n",)))]
    )
    assert out == ["A2", "A1"]


def test_chat_prompts_match_by_the_last_user_message(tmp_path):
    lm = MODELS.get("replay")(path=str(responses(tmp_path, [("last", "yes")])))
    prompt = (("system", "s"), ("user", "first"), ("assistant", "a"), ("user", "last"))
    assert lm.generate_until([GenerateRequest(prompt)]) == ["yes"]


def test_missing_prompts_are_listed(tmp_path):
    lm = MODELS.get("replay")(path=str(responses(tmp_path, [("Q1", "A1")])))
    with pytest.raises(ModelError) as err:
        lm.generate_until([GenerateRequest("Q1"), GenerateRequest("never recorded")])
    assert "1 prompt(s)" in str(err.value) and "never recorded" in str(err.value)
    with pytest.raises(ModelError, match="generation requests only"):
        lm.loglikelihood([LoglikelihoodRequest("a", "b")])


def test_identity_changes_with_the_file_contents(tmp_path):
    path = responses(tmp_path, [("Q", "A")])
    first = MODELS.get("replay")(path=str(path)).identity()
    path.write_text(json.dumps({"prompt": "Q", "response": "B"}) + "\n", encoding="utf-8")
    assert MODELS.get("replay")(path=str(path)).identity() != first


def test_bad_files_and_arguments(tmp_path):
    with pytest.raises(ConfigError, match="path=FILE"):
        MODELS.get("replay")()
    with pytest.raises(ConfigError, match="batch_size=0 must be"):
        MODELS.get("replay")(path="x.jsonl", batch_size=0)
    with pytest.raises(ConfigError, match="cannot read"):
        MODELS.get("replay")(path=str(tmp_path / "none.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.jsonl:1"):
        MODELS.get("replay")(path=str(bad))


def test_responses_per_sample(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(
        json.dumps({"prompt": "Q", "responses": ["first", "second"]}) + "\n"
        + json.dumps({"prompt": "Same", "response": "always"}) + "\n"
    )  # fmt: skip
    lm = MODELS.get("replay")(path=str(path))
    asked = [GenerateRequest("Q", sample_index=i) for i in (1, 0)]
    asked += [GenerateRequest("Same", sample_index=i) for i in (0, 3)]
    assert lm.generate_until(asked) == ["second", "first", "always", "always"]
    with pytest.raises(ModelError, match="sample 2 of 'Q'"):
        lm.generate_until([GenerateRequest("Q", sample_index=2)])
    path.write_text(json.dumps({"prompt": "Q", "responses": "not a list"}) + "\n")
    with pytest.raises(ConfigError, match=r"r.jsonl:1: .*'responses' \(a list of strings"):
        MODELS.get("replay")(path=str(path))


@pytest.mark.parametrize(
    ("think", "raw", "extra"),
    [
        ({}, "", {}),
        ({}, "", {"reasoning": "hm"}),
        ({"think_end_token": "</think>"}, "hm</think>", {}),
    ],
)
def test_a_recorded_stop_cut_by_a_stop_string_here_becomes_stop_sequence(
    tmp_path, think, raw, extra
):
    path = tmp_path / "r.jsonl"
    answer = raw + "A\nQuestion: more"
    line = {"prompt": "Q", "response": answer, "finish_reason": "stop", **extra}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    lm = MODELS.get("replay")(path=str(path), **think)
    cut, whole = lm.generate_until(
        [GenerateRequest("Q", GenParams(until=("Question:",))), GenerateRequest("Q")]
    )
    assert (cut.text, cut.finish_reason) == ("A\n", "stop_sequence")
    assert (whole.text, whole.finish_reason) == ("A\nQuestion: more", "stop")
