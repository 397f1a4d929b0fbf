"""Requests: hashing (dedupe), kinds, and lm-eval's gen_kwargs normalisation."""

from __future__ import annotations

import pytest

from assay.errors import ConfigError
from assay.requests.types import (
    GenerateRequest,
    GenParams,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RequestKind,
    RollingRequest,
    kind_of,
    lm_eval_gen_kwargs,
    normalize_gen_kwargs,
)


def test_identical_requests_are_equal_and_hash_equal_so_they_dedupe():
    reqs = [
        LoglikelihoodRequest("ctx", " a"),
        LoglikelihoodRequest("ctx", " a"),
        LoglikelihoodRequest("ctx", " b"),
        RollingRequest("text"),
        RollingRequest("text"),
        GenerateRequest("p", GenParams(until=("\n",))),
        GenerateRequest("p", GenParams(until=("\n",))),
        GenerateRequest("p", GenParams(until=("\n",)), sample_index=1),
        GenerateRequest((("user", "hi"),), GenParams()),
        GenerateRequest((("user", "hi"),), GenParams()),
    ]
    assert len(set(reqs)) == 6


def test_kind_of_each_request():
    assert kind_of(LoglikelihoodRequest("a", "b")) is RequestKind.LOGLIKELIHOOD
    assert kind_of(RollingRequest("a")) is RequestKind.LOGLIKELIHOOD_ROLLING
    assert kind_of(GenerateRequest("a")) is RequestKind.GENERATE_UNTIL


def test_loglikelihood_result_unpacks_like_lm_evals_tuple():
    logprob, greedy = LoglikelihoodResult(-1.5, True)
    assert (logprob, greedy) == (-1.5, True)


def test_normalize_defaults_until_to_the_fewshot_delimiter_and_256_tokens():
    params = normalize_gen_kwargs({}, default_until=["\n\n"])
    assert params == GenParams(until=("\n\n",), max_gen_toks=256)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"max_new_tokens": 7}, 7),
        ({"max_tokens": 9}, 9),
        ({"max_tokens": 3, "max_gen_toks": "3"}, 3),
        ({"max_completion_tokens": "11"}, 11),
    ],
)
def test_max_tokens_aliases_mean_max_gen_toks(kwargs, expected):
    assert normalize_gen_kwargs(kwargs, default_until=[]).max_gen_toks == expected


def test_two_max_tokens_aliases_that_disagree_are_refused():
    with pytest.raises(ConfigError, match="max_gen_toks=3 and max_tokens=9"):
        normalize_gen_kwargs({"max_tokens": 9, "max_gen_toks": 3}, default_until=[], source="x")


def test_temperature_implies_sampling_and_do_sample_false_forces_greedy():
    assert normalize_gen_kwargs({"temperature": 0.7}, default_until=[]).do_sample is True
    forced = normalize_gen_kwargs({"temperature": 0.7, "do_sample": False}, default_until=[])
    assert forced.do_sample is False and forced.temperature == 0.0
    text = normalize_gen_kwargs({"do_sample": "true", "temperature": 1}, default_until=[])
    assert text.do_sample is True


def test_until_as_string_and_extra_kwargs_sorted():
    params = normalize_gen_kwargs({"until": "Q:", "zeta": 1, "alpha": 2}, default_until=["x"])
    assert params.until == ("Q:",)
    assert params.extra == (("alpha", 2), ("zeta", 1))
    assert params.as_dict()["alpha"] == 2


@pytest.mark.parametrize(
    "bad",
    [
        {"until": 5},
        {"until": ["a", 1]},
        {"max_gen_toks": "many"},
        {"max_new_tokens": -1},
        {"temperature": -0.1},
        {"top_k": "abc"},
        {"top_k": 2.5},
        {"top_p": "x"},
        {"top_p": 1.5},
        {"seed": "x"},
        {"seed": True},
        {"fit_context": "yes"},
    ],
)
def test_bad_gen_kwargs_raise_config_error_naming_key_and_source(bad):
    with pytest.raises(ConfigError) as raised:
        normalize_gen_kwargs(bad, default_until=[], source="--gen-kwargs")
    message = str(raised.value)
    assert message.startswith("--gen-kwargs: ") and repr(next(iter(bad))) in message


def test_lm_eval_gen_kwargs_defaults_and_float_temperature():
    assert lm_eval_gen_kwargs(None, "\n\n") == {
        "temperature": 0.0,
        "do_sample": False,
        "max_gen_toks": 256,
        "until": ["\n\n"],
    }
    out = lm_eval_gen_kwargs({"temperature": 0, "until": ["A"]}, "\n\n")
    assert out == {"temperature": 0.0, "until": ["A"]}
    assert isinstance(out["temperature"], float)
    assert lm_eval_gen_kwargs({}, "##")["until"] == ["##"]


def test_as_dict_lists_optional_fields_only_when_set():
    assert "top_p" not in GenParams().as_dict()
    assert GenParams(top_p=0.9, seed=3).as_dict()["seed"] == 3


def test_fit_context_is_read_recorded_only_when_set_and_keys_the_request():
    plain = normalize_gen_kwargs({"max_gen_toks": 64}, default_until=[])
    fitted = normalize_gen_kwargs({"max_gen_toks": 64, "fit_context": True}, default_until=[])
    assert not plain.fit_context and fitted.fit_context
    assert normalize_gen_kwargs({"fit_context": "true"}, default_until=[]).fit_context
    assert "fit_context" not in plain.as_dict() and fitted.as_dict()["fit_context"] is True
    assert fitted.extra == () and hash(plain) != hash(fitted)


def test_dict_and_list_generation_params_hash_dedupe_and_key_the_cache():
    """An API's response_format (a dict) or logit_bias travels in GenParams.extra."""
    from assay.requests.cache import request_key

    def params(fmt: dict, stop: list) -> GenParams:
        return GenParams(extra=(("response_format", fmt), ("stop_ids", stop)))

    a = GenerateRequest("p", params({"type": "json_object"}, [1, 2]))
    same = GenerateRequest("p", params({"type": "json_object"}, [1, 2]))
    other = GenerateRequest("p", params({"type": "text"}, [1, 2]))
    assert hash(a) == hash(same) and len({a, same, other}) == 2
    assert {a: 0}[same] == 0  # dict keys work: backends group and dedupe requests this way
    assert request_key(a) == request_key(same) != request_key(other)
    # The key does not depend on the order the dict was written in.
    swapped = GenerateRequest("p", params({"b": 1, "a": 2}, []))
    written = GenerateRequest("p", params({"a": 2, "b": 1}, []))
    assert request_key(swapped) == request_key(written) and hash(swapped) == hash(written)
