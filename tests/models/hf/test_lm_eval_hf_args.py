"""lm-eval's hf model args and gen_kwargs, checked against lm-eval's own hf backend (HFLM) on
the tiny model: the same generations and log-likelihoods, or a refusal naming the reason."""

from __future__ import annotations

import pytest

from assay.errors import ConfigError
from assay.models.hf.args import parse_hf_args
from assay.models.hf.model import hf
from assay.requests.cache import request_key
from assay.requests.types import GenerateRequest, GenParams, LoglikelihoodRequest, RollingRequest

PROMPTS = [
    "The little village",
    "Question: How many clips did Natalia sell?\nAnswer:",
    "Scientists",
]
PAIRS = [
    ("The little village", " sat"),
    ("", "Scientists found"),
    ("Question: 2+2?\nAnswer:", " 4"),
]
TOLERANCE = 1e-5


def lm_eval_hf(tiny_model_dir, **args):
    pytest.importorskip("lm_eval")
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=str(tiny_model_dir), device="cpu", batch_size=1, **args)


def instances(kind, arguments):
    from lm_eval.api.instance import Instance

    return [Instance(kind, {}, a, i) for i, a in enumerate(arguments)]


@pytest.mark.slow
@pytest.mark.parametrize(
    "gen_kwargs",
    [{"repetition_penalty": 1.3}, {"num_beams": 3}, {"no_repeat_ngram_size": 2},
     {"num_beams": 2, "until": ["\n"]}],
)  # fmt: skip
def test_generation_kwargs_reach_generate_as_lm_eval_passes_them(tiny_model_dir, gen_kwargs):
    theirs = lm_eval_hf(tiny_model_dir, dtype="float32")
    ours = hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=4)
    kwargs = {"max_gen_toks": 16, **gen_kwargs}
    until = kwargs.pop("until", [])
    want = theirs.generate_until(
        instances("generate_until", [(p, {"until": until, **kwargs}) for p in PROMPTS])
    )
    extra = tuple(sorted((k, v) for k, v in kwargs.items() if k != "max_gen_toks"))
    params = GenParams(until=tuple(until), max_gen_toks=16, extra=extra)
    got = [g.text for g in ours.generate_until([GenerateRequest(p, params) for p in PROMPTS])]
    assert got == want
    plain = GenParams(until=tuple(until), max_gen_toks=16)
    greedy = [g.text for g in ours.generate_until([GenerateRequest(p, plain) for p in PROMPTS])]
    assert greedy != got  # the setting changed the answers, as it does in lm-eval
    # ... and the answers are cached apart from plain greedy ones.
    assert request_key(GenerateRequest(PROMPTS[0], params)) != request_key(
        GenerateRequest(PROMPTS[0], plain)
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [{"use_fast_tokenizer": False}, {"add_bos_token": True}, {"prefix_token_id": 5},
     {"add_bos_token": True, "prefix_token_id": 7},
     {"backend": "causal", "low_cpu_mem_usage": True, "torch_dtype": "float32"}],
)  # fmt: skip
def test_model_args_score_as_lm_eval_scores(tiny_model_dir, args):
    dtype = {} if "torch_dtype" in args else {"dtype": "float32"}
    theirs = lm_eval_hf(tiny_model_dir, **dtype, **args)
    ours = hf(pretrained=str(tiny_model_dir), batch_size=1, **dtype, **args)
    want = [x[0] for x in theirs.loglikelihood(instances("loglikelihood", PAIRS))]
    got = [r.logprob for r in ours.loglikelihood([LoglikelihoodRequest(c, x) for c, x in PAIRS])]
    assert max(abs(a - b) for a, b in zip(got, want, strict=True)) < TOLERANCE
    texts = [(c + x,) for c, x in PAIRS]
    want = theirs.loglikelihood_rolling(instances("loglikelihood_rolling", texts))
    got = [r.logprob for r in ours.loglikelihood_rolling([RollingRequest(t) for (t,) in texts])]
    assert max(abs(a - b) for a, b in zip(got, want, strict=True)) < TOLERANCE
    if "prefix_token_id" in args:  # it changes the empty context's score and the cache key
        default = hf(pretrained=str(tiny_model_dir), batch_size=1, dtype="float32")
        [empty] = default.loglikelihood([LoglikelihoodRequest(*PAIRS[1])])
        [moved] = ours.loglikelihood([LoglikelihoodRequest(*PAIRS[1])])
        assert abs(empty.logprob - moved.logprob) > TOLERANCE
        assert default.identity() != ours.identity()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"autogptq": True}, "transformers loads GPTQ checkpoints itself"),
        ({"gptqmodel": "true"}, "gptqmodel package"),
        ({"backend": "seq2seq"}, "decoder-only"),
        ({"tp_plan": "auto"}, "parallelize=true"),
        ({"mixed_precision_dtype": "bfloat16"}, "autocast"),
        ({"softmax_dtype": "float64"}, "float32 always"),
        ({"truncation": True}, "left-truncates"),
        ({"use_fast_tokeniser": False}, "did you mean 'use_fast_tokenizer'"),
        ({"dtype": "float16", "torch_dtype": "float32"}, "disagree"),
        ({"max_memory_per_gpu": "1GiB"}, "applies to parallelize=true"),
    ],
)
def test_lm_eval_args_assay_does_not_honour_are_refused_with_the_reason(args, message):
    with pytest.raises(ConfigError, match=message):
        parse_hf_args({"pretrained": "x", **args})


def test_accepted_lm_eval_args_take_lm_evals_meaning():
    args = parse_hf_args(
        {"pretrained": "x", "torch_dtype": "bfloat16", "backend": "causal", "logits_cache": False,
         "softmax_dtype": "float32", "low_cpu_mem_usage": True, "rope_theta": 5000.0,
         "autogptq": False}
    )  # fmt: skip
    assert args.dtype == "bfloat16" and args.backend == "causal"
    assert args.from_pretrained == {"low_cpu_mem_usage": True, "rope_theta": 5000.0}


@pytest.mark.slow
def test_a_passed_on_name_the_model_config_does_not_know_is_refused(tiny_model_dir):
    from assay.errors import AssayError

    with pytest.raises(AssayError, match="neither an hf backend argument"):
        hf(pretrained=str(tiny_model_dir), dtype="float32", not_a_setting=3)
    # A setting of the config is passed on and changes the model (and its identity).
    model = hf(pretrained=str(tiny_model_dir), dtype="float32", rms_norm_eps=0.5)
    assert model.model.config.rms_norm_eps == 0.5
    assert model.identity()["from_pretrained"] == {"rms_norm_eps": 0.5}


def _delta_checkpoint(base, into, scale=0.02, seed=0):
    """A delta checkpoint of `base`'s shape (small seeded weights) and the checkpoint of the
    summed weights it should give."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    generator = torch.Generator().manual_seed(seed)
    delta = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    summed = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    with torch.no_grad():
        for d, s in zip(delta.state_dict().values(), summed.state_dict().values()):
            d.copy_(torch.randn(d.shape, generator=generator) * scale)
            s.add_(d)
    delta.save_pretrained(into / "delta")
    summed.save_pretrained(into / "summed")
    AutoTokenizer.from_pretrained(base).save_pretrained(into / "summed")
    return into / "delta", into / "summed"


@pytest.mark.slow
def test_delta_weights_add_to_the_base_as_lm_eval_adds_them(tiny_model_dir, tmp_path):
    delta, summed = _delta_checkpoint(tiny_model_dir, tmp_path)
    requests = [LoglikelihoodRequest(c, x) for c, x in PAIRS]
    ours = hf(pretrained=str(tiny_model_dir), dtype="float32", delta=str(delta))
    got = [r.logprob for r in ours.loglikelihood(requests)]
    # base + delta: the scores of a checkpoint holding the summed weights ...
    expected = hf(pretrained=str(summed), dtype="float32")
    want = [r.logprob for r in expected.loglikelihood(requests)]
    assert max(abs(a - b) for a, b in zip(got, want, strict=True)) < TOLERANCE
    base = hf(pretrained=str(tiny_model_dir), dtype="float32")
    assert max(abs(a - r.logprob) for a, r in zip(got, base.loglikelihood(requests))) > 1e-3
    # ... and lm-eval's own handling of delta.
    theirs = lm_eval_hf(tiny_model_dir, dtype="float32", delta=str(delta))
    lm_eval = [x[0] for x in theirs.loglikelihood(instances("loglikelihood", PAIRS))]
    assert max(abs(a - b) for a, b in zip(got, lm_eval, strict=True)) < TOLERANCE


def test_delta_and_peft_together_are_refused_as_in_lm_eval():
    with pytest.raises(ConfigError, match="both change the weights"):
        parse_hf_args({"pretrained": "m", "delta": "d", "peft": "p"})
