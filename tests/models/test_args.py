"""One model-args mechanism: every backend refuses unknown names (with the closest valid one)
and badly typed values in the same words, before anything is loaded."""

from __future__ import annotations

import pytest

from assay.errors import ConfigError
from assay.models.args import parse_kv
from assay.models.base import MODELS


@pytest.mark.parametrize(
    ("backend", "args", "typo", "suggestion"),
    [
        ("dummy", {"sed": 1}, "sed", "seed"),
        ("replay", {"path": "x.jsonl", "bach_size": 2}, "bach_size", "batch_size"),
        ("hf", {"pretrained": "m", "batchsize": 4}, "batchsize", "batch_size"),
        ("openai-chat", {"model": "m", "num_concurent": 2}, "num_concurent", "num_concurrent"),
        ("openai-completions", {"model": "m", "max_lenght": 9}, "max_lenght", "max_length"),
        (
            "vllm",
            {"pretrained": "m", "tensor_parallel": 2},
            "tensor_parallel",
            "tensor_parallel_size",
        ),
    ],
)
def test_unknown_args_are_refused_with_the_closest_name(backend, args, typo, suggestion):
    with pytest.raises(ConfigError) as err:
        MODELS.get(backend)(**args)
    message = str(err.value)
    assert message.startswith(f"--model {backend}: unknown model arg(s) {typo!r}")
    assert f"did you mean {suggestion!r}?" in message and "Valid: " in message


@pytest.mark.parametrize(
    ("backend", "args", "fragment"),
    [
        ("dummy", {"delay": -1}, "delay must be a number of seconds >= 0, got -1"),
        ("dummy", {"delay": "soon"}, "delay='soon' must be a number of seconds >= 0"),
        ("dummy", {"batch_size": "many"}, "batch_size='many' must be a positive whole number"),
        ("hf", {"pretrained": "m", "device": "gpu"}, "device='gpu' must be cpu, cuda, cuda:N"),
        ("hf", {"pretrained": "m", "dtype": "float64"}, "must be one of auto, float32"),
        ("hf", {"pretrained": "m", "max_length": 0}, "max_length=0 must be at least 1"),
        ("hf", {}, "'pretrained' is required"),
    ],
)
def test_bad_values_name_the_arg_the_value_and_what_it_must_be(backend, args, fragment):
    with pytest.raises(ConfigError, match=f"--model {backend}") as err:
        MODELS.get(backend)(**args)
    assert fragment in str(err.value)


def test_hf_dtype_spellings_and_none_as_not_given():
    from assay.models.hf.args import parse_hf_args

    args = parse_hf_args({"pretrained": "m", "dtype": "torch.BFloat16", "max_length": None})
    assert args.dtype == "bfloat16" and args.max_length is None
    assert parse_hf_args({"pretrained": "m", "device": "CUDA:1"}).device == "cuda:1"


def test_command_line_values_are_python_literals():
    parsed = parse_kv("pretrained=gpt2,batch_size=8,until=['a','b'],dtype=float16", "--model-args")
    assert parsed == {
        "pretrained": "gpt2",
        "batch_size": 8,
        "until": ["a", "b"],
        "dtype": "float16",
    }
