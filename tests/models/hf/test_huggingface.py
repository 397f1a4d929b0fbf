"""transformers backend (assay/models/hf/model.py and its _hf_* modules) on the tiny model.

Every score is checked against a naive reference written here: one plain forward pass per
(context, continuation) or rolling window, log_softmax, gather. Generation is checked against a
token-by-token argmax loop of the model. Tokenisation follows lm-eval's rules, restated here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from assay.errors import AssayError, ConfigError, ModelError
from assay.models.hf import model as huggingface
from assay.models.hf.model import hf
from assay.requests.types import (
    GenerateRequest,
    GenParams,
    LoglikelihoodRequest,
    RollingRequest,
)

TOLERANCE = 1e-5

CONTEXT_A = "A man is standing in a kitchen. He picks up a knife and"
CONTEXT_B = "Question: Natalia sold clips to 48 of her friends in April.\nAnswer:"
STORY = (
    "The little village sat at the bottom of a green valley, where a slow river turned a "
    "wooden mill. Every morning the baker opened her shop before the sun came up, and the "
    "smell of fresh bread drifted along the narrow streets."
)


# -- fixtures and references ------------------------------------------------------------------


def texts(generations):
    """The answers of `generate_until`'s Generations (as lm-eval's backend returns them)."""
    return [g.text for g in generations]


@pytest.fixture(scope="module")
def lm(tiny_model_dir):
    return hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=4)


@pytest.fixture(scope="module")
def lm_short(tiny_model_dir):
    """max_length=16: truncation and several rolling windows on short texts."""
    return hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=3, max_length=16)


def lm_eval_pair(tokenizer, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """lm-eval's (context ids, continuation ids) for a non-empty context."""
    stripped = context.rstrip()
    continuation = context[len(stripped) :] + continuation
    context_ids = tokenizer(stripped)["input_ids"]
    whole = tokenizer(stripped + continuation)["input_ids"]
    return context_ids, whole[len(context_ids) :]


def naive_score(model, context_ids, continuation_ids, max_length=None) -> tuple[float, bool]:
    """One unpadded forward pass; log_softmax; gather the continuation tokens."""
    import torch

    ids = [*context_ids, *continuation_ids]
    if max_length is not None:
        ids = ids[-(max_length + 1) :]
    with torch.no_grad():
        logits = model(torch.tensor([ids[:-1]])).logits[0]
    logprobs = torch.log_softmax(logits.double(), dim=-1)[-len(continuation_ids) :]
    target = torch.tensor(continuation_ids)
    total = logprobs.gather(1, target[:, None]).sum().item()
    return total, bool((logprobs.argmax(-1) == target).all())


def naive_greedy(model, tokenizer, prompt: str | list[int], max_new: int) -> str:
    """Argmax token by token over the whole sequence, no cache, stop at EOS."""
    import torch

    ids = tokenizer(prompt)["input_ids"] if isinstance(prompt, str) else prompt
    new: list[int] = []
    with torch.no_grad():
        for _ in range(max_new):
            token = int(model(torch.tensor([ids + new])).logits[0, -1].argmax())
            new.append(token)
            if token == tokenizer.eos_token_id:
                break
    return tokenizer.decode(new, skip_special_tokens=True)


def greedy_continuation(model, tokenizer, context: str, n: int) -> str:
    """Text the model would write greedily after `context` (n tokens)."""
    import torch

    ids = tokenizer(context)["input_ids"]
    with torch.no_grad():
        for _ in range(n):
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    return tokenizer.decode(ids[-n:])


def close(got, want) -> bool:
    return abs(got[0] - want[0]) <= TOLERANCE and got[1] == want[1]


# -- arguments and loading errors (no model is loaded) ----------------------------------------


@pytest.fixture
def no_loading(monkeypatch):
    def fail(*_args, **_kwargs):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr(huggingface, "load", fail)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"pretrained": "m", "batchsize": 4}, "did you mean 'batch_size'"),
        ({"pretrained": "m", "batch_size": 32, "max_batch_size": 8}, "max_batch_size"),
        ({"pretrained": "m", "dtype": "float64"}, "dtype"),
        ({"pretrained": "m", "batch_size": "many"}, "batch_size"),
        ({"pretrained": "m", "max_length": 0}, "max_length"),
        ({"pretrained": "m", "add_bos_token": "maybe"}, "add_bos_token"),
        ({"pretrained": "m", "device": "gpu"}, "device"),
        ({"batch_size": 4}, "pretrained="),
    ],
)
def test_bad_model_args_fail_before_loading(no_loading, args, expected):
    with pytest.raises(ConfigError) as err:
        hf(**args)
    assert expected in str(err.value)


def test_missing_directory_is_a_model_error(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelError) as err:
        hf(pretrained=str(missing))
    assert str(missing) in str(err.value) and "no such directory" in str(err.value)


def test_file_instead_of_directory_is_a_model_error(tmp_path):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"")
    with pytest.raises(ModelError) as err:
        hf(pretrained=str(weights))
    assert "is a file" in str(err.value)


@pytest.mark.slow
def test_directory_without_config_is_a_model_error(tiny_model_dir, tmp_path):
    broken = shutil.copytree(tiny_model_dir, tmp_path / "model")
    (broken / "config.json").unlink()
    with pytest.raises(ModelError) as err:
        hf(pretrained=str(broken))
    assert "has no config.json" in str(err.value)


@pytest.mark.slow
def test_garbage_config_is_a_model_error_naming_the_directory(tiny_model_dir, tmp_path):
    broken = shutil.copytree(tiny_model_dir, tmp_path / "model")
    (broken / "config.json").write_text("{not json")
    with pytest.raises(AssayError) as err:
        hf(pretrained=str(broken))
    assert isinstance(err.value, ModelError | ConfigError)
    assert str(broken) in str(err.value) and "config" in str(err.value)


@pytest.mark.slow
def test_missing_weights_is_a_model_error(tiny_model_dir, tmp_path):
    broken = shutil.copytree(tiny_model_dir, tmp_path / "model")
    (broken / "model.safetensors").unlink()
    with pytest.raises(ModelError) as err:
        hf(pretrained=str(broken))
    assert "could not load the weights" in str(err.value) and str(broken) in str(err.value)


# -- tokenisation -------------------------------------------------------------------------------


@pytest.mark.slow
def test_context_trailing_whitespace_moves_to_the_continuation(lm):
    tokenizer = lm.tokenizer
    [(context_ids, continuation_ids)] = lm._view.encode_pairs([("The little village ", "sat")])
    assert context_ids == tokenizer("The little village")["input_ids"]
    # "sat" is scored as " sat": the space is part of the continuation, as in lm-eval.
    assert tokenizer.decode(continuation_ids) == " sat"
    got = lm.loglikelihood([LoglikelihoodRequest("The little village ", "sat")])
    want = lm.loglikelihood([LoglikelihoodRequest("The little village", " sat")])
    assert got == want


@pytest.mark.slow
def test_empty_context_conditions_on_the_bos_token(lm):
    tokenizer = lm.tokenizer
    continuation = " the baker opened her shop"
    ids = tokenizer(continuation, add_special_tokens=False)["input_ids"]
    want = naive_score(lm.model, [tokenizer.bos_token_id], ids)
    [got] = lm.loglikelihood([LoglikelihoodRequest("", continuation)])
    assert close(got, want)
    # A continuation that starts with BOS uses that token as its context instead.
    [with_bos] = lm.loglikelihood([LoglikelihoodRequest("", "<s>" + continuation)])
    assert close(with_bos, want)


@pytest.mark.slow
def test_empty_continuation_scores_zero_and_greedy(lm):
    got = lm.loglikelihood(
        [LoglikelihoodRequest(CONTEXT_A, ""), LoglikelihoodRequest(CONTEXT_A, " the")]
    )
    assert got[0] == (0.0, True)
    assert got[1][0] < 0.0


@pytest.mark.slow
def test_long_inputs_are_left_truncated_to_max_length(lm, lm_short):
    tokenizer = lm.tokenizer
    requests = [(STORY, " and the river"), (CONTEXT_B, " 72")]
    got = lm_short.loglikelihood([LoglikelihoodRequest(c, x) for c, x in requests])
    full = lm.loglikelihood([LoglikelihoodRequest(c, x) for c, x in requests])
    for (context, continuation), short, untruncated in zip(requests, got, full, strict=True):
        context_ids, continuation_ids = lm_eval_pair(tokenizer, context, continuation)
        assert len(context_ids) + len(continuation_ids) > 17
        assert close(short, naive_score(lm.model, context_ids, continuation_ids, max_length=16))
        assert abs(short[0] - untruncated[0]) > 1e-3  # truncation did change the input


@pytest.mark.slow
def test_continuation_longer_than_max_length_is_a_model_error(lm_short):
    with pytest.raises(ModelError) as err:
        lm_short.loglikelihood([LoglikelihoodRequest("Hello", " " + STORY)])
    assert "max_length=16" in str(err.value)


@pytest.mark.slow
def test_count_tokens_counts_as_the_prompt_is_encoded(lm):
    assert lm.count_tokens(STORY) == len(lm.tokenizer(STORY)["input_ids"])
    assert lm.max_length == 512


# -- loglikelihood --------------------------------------------------------------------------------


@pytest.mark.slow
def test_shared_prefix_scores_equal_independent_forward_passes(lm):
    tokenizer, model = lm.tokenizer, lm.model
    # Llama honours packed masks and logits_to_keep: the probe must leave both on.
    assert lm.scorer.share_prefixes and lm.scorer.keep_logits
    greedy_a = greedy_continuation(model, tokenizer, CONTEXT_A, 3)
    requests = [
        (CONTEXT_A, " the"),  # one token
        (CONTEXT_A, " cuts the vegetables into small pieces"),
        (CONTEXT_A, " laughs and hands him a plate"),
        (CONTEXT_A, greedy_a),
        (CONTEXT_A, " the"),  # a duplicate
        (CONTEXT_A + " ", "sits down"),  # same context after whitespace moves
        (CONTEXT_B, " 48 / 2 = 24"),
        (CONTEXT_B, " 72"),
        ("The weather", " today will be sunny"),
    ]
    got = lm.loglikelihood([LoglikelihoodRequest(c, x) for c, x in requests])
    want = [naive_score(model, *lm_eval_pair(tokenizer, c, x)) for c, x in requests]
    assert len(got) == len(requests)
    for g, w in zip(got, want, strict=True):
        assert close(g, w), (g, w)
    greedy = [w[1] for w in want]
    assert any(greedy) and not all(greedy)  # both outcomes are exercised


@pytest.mark.slow
def test_eager_attention_shares_prefixes_with_additive_masks_and_scores_the_same(
    lm, tiny_model_dir
):
    eager = hf(pretrained=str(tiny_model_dir), dtype="float32", attn_implementation="eager")
    assert eager.scorer.mask_style == "additive" and eager.scorer.share_prefixes
    assert eager.identity()["attn_implementation"] == "eager"
    assert eager.identity() != lm.identity()  # the cache keeps the two apart
    requests = [
        LoglikelihoodRequest(CONTEXT_A, " cuts the vegetables"),
        LoglikelihoodRequest(CONTEXT_A, " laughs"),
        LoglikelihoodRequest(CONTEXT_B, " 72"),
    ]
    for g, w in zip(eager.loglikelihood(requests), lm.loglikelihood(requests), strict=True):
        assert close(g, w), (g, w)


def test_unknown_attention_implementation_is_a_clear_error(tiny_model_dir):
    with pytest.raises(AssayError, match="attn"):
        hf(pretrained=str(tiny_model_dir), attn_implementation="no_such_kernel")


@pytest.mark.slow
def test_single_token_continuations_equal_independent_forward_passes(lm):
    tokenizer, model = lm.tokenizer, lm.model
    words = [" the", " and", " of", " a", " man", " 7", " 72"]
    for word in words:
        assert len(tokenizer(word, add_special_tokens=False)["input_ids"]) == 1
    requests = [(context, word) for context in (CONTEXT_A, CONTEXT_B) for word in words]
    got = lm.loglikelihood([LoglikelihoodRequest(c, x) for c, x in requests])
    want = [naive_score(model, *lm_eval_pair(tokenizer, c, x)) for c, x in requests]
    for g, w in zip(got, want, strict=True):
        assert close(g, w), (g, w)
    assert len({round(g[0], 4) for g in got}) > len(words)  # scores really differ per request


@pytest.mark.slow
def test_scores_do_not_depend_on_batch_composition(lm, tiny_model_dir):
    one = hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=1)
    requests = [
        LoglikelihoodRequest(CONTEXT_A, " the"),
        LoglikelihoodRequest(CONTEXT_B, " 72 clips"),
        LoglikelihoodRequest(STORY, " and"),
    ]
    for g, w in zip(lm.loglikelihood(requests), one.loglikelihood(requests), strict=True):
        assert close(g, w)


@pytest.mark.slow
def test_batch_size_auto_picks_sizes_and_scores_as_batch_size_one(tiny_model_dir):
    auto = hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size="auto", max_batch_size=8)
    one = hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=1)
    requests = [
        LoglikelihoodRequest(context, continuation)
        for context in (CONTEXT_A, CONTEXT_B, STORY, "Every morning")
        for continuation in (" the baker", " 48", " and the sun came up")
    ]
    got = auto.loglikelihood(requests)
    assert auto.batch_sizes and all(1 <= size <= 8 for size in auto.batch_sizes)
    assert one.batch_sizes == []
    for g, w in zip(got, one.loglikelihood(requests), strict=True):
        assert close(g, w)


# -- rolling loglikelihood --------------------------------------------------------------------------


def naive_rolling(model, ids: list[int], prefix: int, max_length: int) -> float:
    """lm-eval's disjoint windows, each scored by its own forward pass."""
    total = naive_score(model, [prefix], ids[:max_length])[0]
    done = min(max_length, len(ids))
    while done < len(ids):
        end = min(done + max_length, len(ids))
        # Predict ids[done:end] from the max_length + 1 ids that end there.
        window = ids[end - max_length - 1 : end]
        total += naive_score(model, window[: -(end - done)], ids[done:end])[0]
        done = end
    return total


@pytest.mark.slow
def test_rolling_loglikelihood_sums_lm_eval_windows(lm, lm_short):
    tokenizer = lm.tokenizer
    texts = [STORY, CONTEXT_B, "Hi"]
    got = lm_short.loglikelihood_rolling([RollingRequest(t) for t in texts])
    untruncated = lm.loglikelihood_rolling([RollingRequest(STORY)])[0]
    for text, result in zip(texts, got, strict=True):
        ids = tokenizer(text)["input_ids"]
        want = naive_rolling(lm.model, ids, tokenizer.bos_token_id, 16)
        assert result.n_tokens == len(ids)
        assert abs(result.logprob - want) <= TOLERANCE, (text, result.logprob, want)
    assert len(tokenizer(STORY)["input_ids"]) > 3 * 16  # several windows
    assert abs(got[0].logprob - untruncated.logprob) > 1e-3  # windows changed the context


# -- generation ----------------------------------------------------------------------------------


PROMPTS = [
    "The little village",
    "Question: How many clips did Natalia sell?\nAnswer:",
    "A man is standing in a kitchen. He picks up a knife",
    "Scientists",
    "How to clean a bicycle chain: first, shift the chain onto the smallest gear.",
]


@pytest.mark.slow
def test_greedy_generation_equals_a_token_by_token_argmax_loop(lm):
    params = GenParams(until=(), max_gen_toks=12)
    got = texts(lm.generate_until([GenerateRequest(p, params) for p in PROMPTS]))
    want = [naive_greedy(lm.model, lm.tokenizer, p, 12) for p in PROMPTS]
    assert got == want
    assert len(set(got)) == len(PROMPTS)


@pytest.mark.slow
def test_generation_is_cut_at_stop_strings(lm):
    free = texts(
        lm.generate_until([GenerateRequest(p, GenParams(max_gen_toks=12)) for p in PROMPTS])
    )
    stops = []
    for text in free:
        visible = [c for c in text[2:] if c.isprintable() and not c.isspace()]
        stops.append(visible[0])
    requests = [
        GenerateRequest(p, GenParams(until=(stop, "never-seen"), max_gen_toks=12))
        for p, stop in zip(PROMPTS, stops, strict=True)
    ]
    got = texts(lm.generate_until(requests))
    for text, stop, cut in zip(free, stops, got, strict=True):
        assert cut == text.split(stop, 1)[0]
        assert stop not in cut and len(cut) < len(text)


@pytest.mark.slow
def test_generation_prompts_are_left_truncated(lm_short):
    params = GenParams(max_gen_toks=4)
    tokenizer = lm_short.tokenizer
    ids = tokenizer(STORY)["input_ids"][-(16 - 4) :]
    [got] = texts(lm_short.generate_until([GenerateRequest(STORY, params)]))
    want = naive_greedy(lm_short.model, tokenizer, ids, 4)
    assert got == want
    with pytest.raises(ModelError):
        lm_short.generate_until([GenerateRequest(STORY, GenParams(max_gen_toks=16))])


@pytest.mark.slow
def test_fit_context_keeps_the_prompt_and_generates_the_room_it_leaves(lm_short):
    # lighteval's generation length: max_gen_toks is a ceiling; each prompt stays whole and
    # generates at most what its own length leaves of the 16-token window.
    tokenizer = lm_short.tokenizer
    short = tokenizer("Hi")["input_ids"]
    medium = tokenizer("A man is standing")["input_ids"]
    assert len(short) < len(medium) < 16
    params = GenParams(until=(), max_gen_toks=100, fit_context=True)
    got = texts(
        lm_short.generate_until(
            [GenerateRequest(t, params) for t in ("Hi", "A man is standing", STORY)]
        )
    )
    # A prompt past the window keeps its last 15 tokens and generates one.
    story = tokenizer(STORY)["input_ids"][-15:]
    want = [
        naive_greedy(lm_short.model, tokenizer, short, 16 - len(short)),
        naive_greedy(lm_short.model, tokenizer, medium, 16 - len(medium)),
        naive_greedy(lm_short.model, tokenizer, story, 1),
    ]
    assert got == want
    # Below the room, max_gen_toks still caps the generation.
    capped = GenParams(until=(), max_gen_toks=2, fit_context=True)
    [two] = texts(lm_short.generate_until([GenerateRequest("Hi", capped)]))
    assert two == naive_greedy(lm_short.model, tokenizer, short, 2)


def sampled(lm, prompts, seed, repeats=1):
    params = GenParams(max_gen_toks=10, do_sample=True, temperature=1.0, seed=seed)
    requests = [GenerateRequest(p, params, i) for p in prompts for i in range(repeats)]
    return texts(lm.generate_until(requests))


@pytest.mark.slow
def test_seeded_sampling_is_reproducible_and_independent_of_batch_size(lm, tiny_model_dir):
    one = hf(pretrained=str(tiny_model_dir), dtype="float32", batch_size=1)
    first = sampled(lm, PROMPTS, seed=7)
    assert sampled(lm, PROMPTS, seed=7) == first
    assert sampled(one, PROMPTS, seed=7) == first
    assert sampled(lm, PROMPTS[::-1], seed=7) == first[::-1]
    assert sampled(lm, PROMPTS, seed=8) != first
    greedy = texts(
        lm.generate_until([GenerateRequest(p, GenParams(max_gen_toks=10)) for p in PROMPTS])
    )
    assert first != greedy


@pytest.mark.slow
def test_repeats_draw_distinct_reproducible_samples(lm):
    samples = sampled(lm, PROMPTS[:2], seed=3, repeats=4)
    assert len(samples) == 8
    assert len(set(samples[:4])) > 1 and len(set(samples[4:])) > 1
    # Sample i of a prompt does not depend on how many repeats were asked for.
    assert sampled(lm, PROMPTS[:2], seed=3, repeats=2) == samples[:2] + samples[4:6]
    greedy = GenParams(max_gen_toks=10)
    repeated = texts(lm.generate_until([GenerateRequest(PROMPTS[0], greedy, i) for i in range(3)]))
    assert len(set(repeated)) == 1


@pytest.mark.slow
def test_unsupported_generation_arguments_are_model_errors(lm):
    for extra in (("no_such_setting", 4), ("num_return_sequences", 2)):
        params = GenParams(max_gen_toks=4, extra=(extra,))
        with pytest.raises(ModelError) as err:
            lm.generate_until([GenerateRequest("Hi", params)])
        assert extra[0] in str(err.value)


@pytest.mark.slow
def test_identity_records_dtype_length_and_weights(lm, lm_short):
    identity = lm.identity()
    assert identity["backend"] == "hf" and identity["dtype"] == "float32"
    assert identity["max_length"] == 512 and lm_short.identity()["max_length"] == 16
    assert json.dumps(identity)  # the response cache stores it as JSON
    assert Path(identity["pretrained"]).is_dir()


def test_provenance_names_the_weights_tokenizer_and_template(lm, tiny_model_dir):
    import hashlib
    import json

    from safetensors import safe_open

    config = json.loads((tiny_model_dir / "tokenizer_config.json").read_text())
    template = config.get("chat_template") or (tiny_model_dir / "chat_template.jinja").read_text()
    with safe_open(str(tiny_model_dir / "model.safetensors"), "pt") as weights:
        stored = sum(weights.get_tensor(k).numel() for k in weights.keys())  # noqa: SIM118
    tied = json.loads((tiny_model_dir / "config.json").read_text()).get("tie_word_embeddings")
    p = lm.provenance()
    assert p["backend"] == "hf" and p["model"] == str(tiny_model_dir)
    assert p["revision"] == "main" and p["tokenizer"] == str(tiny_model_dir)
    assert p["dtype"] == "float32" and p["num_parameters"] == stored
    assert p["chat_template_sha256"] == hashlib.sha256(template.encode()).hexdigest()
    assert p["max_length"] == 512 and p["add_bos_token"] is None
    assert tied is not True  # otherwise the stored tensors would undercount the parameters


# -- lm-eval's hf model args: think_end_token, parallelize / device_map, quantization ----------


@pytest.mark.slow
def test_think_end_token_keeps_what_follows_the_thinking_as_lm_eval(lm, tiny_model_dir):
    from lm_eval.models.utils import postprocess_generated_text

    params = GenParams(until=(), max_gen_toks=12)
    free = texts(lm.generate_until([GenerateRequest(p, params) for p in PROMPTS]))
    marker = next(t[4:6] for t in free if len(t) > 8 and t[4:6].strip())
    thinking = hf(pretrained=str(tiny_model_dir), dtype="float32", think_end_token=marker)
    got = texts(thinking.generate_until([GenerateRequest(p, params) for p in PROMPTS]))
    assert got == [postprocess_generated_text(t, [], marker) for t in free]
    assert any(marker in t for t in free) and all(marker not in g for g in got)
    assert thinking.identity()["think_end_token"] == marker
    assert "think_end_token" not in lm.identity()  # caches of runs without it stay valid


def test_think_end_token_as_a_token_id_cuts_after_its_last_occurrence():
    from assay.models.hf.generate import Generator
    from assay.models.thinking import Thinking

    class View:
        def decode(self, ids):  # skips EOS (id 0), as decoding skips special tokens
            return "".join(f" t{i}" for i in ids if i)

    generator = Generator.__new__(Generator)
    generator.view = View()
    generator.think_end = (7, None)
    generator.thinking = Thinking("<end>")
    generator.think_start_id = None
    generator.eos_token_ids = {0}
    closed = generator._generation([1, 7, 2, 7, 3, 4, 0], "stop", [], False)
    assert closed.text == "t3 t4" and closed.thinking_closed is True
    assert closed.reasoning == " t1 t7 t2"  # everything before the last end token
    assert (closed.reasoning_tokens, closed.answer_tokens) == (3, 2)  # EOS counts in neither
    unclosed = generator._generation([1, 2], "length", [], False)
    assert unclosed.text == "t1 t2"  # lm-eval's rule: left-stripped even without the token
    assert unclosed.thinking_closed is False and str(unclosed) == ""
    assert (unclosed.reasoning_tokens, unclosed.answer_tokens) == (2, 0)


@pytest.mark.slow
def test_parallelize_places_the_model_through_accelerate_with_the_same_scores(
    lm, tiny_model_dir, monkeypatch
):
    import transformers

    seen = {}
    original = transformers.AutoModelForCausalLM.from_pretrained

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", spy)
    sharded = hf(pretrained=str(tiny_model_dir), dtype="float32", parallelize=True)
    assert seen["device_map"] == "auto"  # accelerate places the layers (one CPU here)
    requests = [
        LoglikelihoodRequest(CONTEXT_A, " the bread"),
        LoglikelihoodRequest(CONTEXT_B, " 72"),
    ]
    for got, want in zip(sharded.loglikelihood(requests), lm.loglikelihood(requests), strict=True):
        assert got.logprob == pytest.approx(want.logprob, abs=TOLERANCE)
        assert got.is_greedy == want.is_greedy


def test_placement_kwargs_follow_lm_evals_parallelize_and_device_map():
    import torch

    from assay.models.hf.args import parse_hf_args
    from assay.models.hf.load import placement_kwargs

    cpu = torch.device("cpu")
    assert placement_kwargs(parse_hf_args({"pretrained": "m", "parallelize": "true"}), cpu) == {
        "device_map": "auto"
    }
    args = parse_hf_args({"pretrained": "m", "device_map": "sequential"})
    assert placement_kwargs(args, cpu) == {"device_map": "sequential"}
    assert placement_kwargs(parse_hf_args({"pretrained": "m"}), cpu) == {}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"device": "cpu", "parallelize": "true"}, "device=cpu and parallelize=true"),
        ({"device": "cpu", "device_map": "auto"}, "device=cpu and device_map=auto"),
        ({"device_map": "everywhere"}, "device_map"),
        ({"load_in_4bit": "true", "load_in_8bit": "true"}, "load_in_4bit and load_in_8bit"),
        ({"quantization_config": "[1]"}, "quantization_config"),
    ],
)
def test_conflicting_or_bad_placement_args_are_refused(args, message):
    from assay.models.hf.args import parse_hf_args

    with pytest.raises(ConfigError) as refused:
        parse_hf_args({"pretrained": "m", **args})
    assert message in str(refused.value)


@pytest.mark.parametrize(
    "args",
    [
        {"load_in_4bit": "true"},
        {"load_in_8bit": "true"},
        {"quantization_config": '{"load_in_4bit": true}'},
    ],
)
def test_bitsandbytes_quantization_is_refused_clearly_without_a_gpu(tiny_model_dir, args):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: quantization is allowed there")
    with pytest.raises(ConfigError) as refused:
        hf(pretrained=str(tiny_model_dir), **args)
    message = str(refused.value)
    assert next(iter(args)) in message and "bitsandbytes" in message and "CUDA" in message


def test_quantization_args_become_transformers_quantization_configs():
    import torch

    from assay.models.hf.args import parse_hf_args
    from assay.models.hf.load import placement_kwargs

    cuda = torch.device("cuda:0")  # only the kwargs are built: no GPU is touched
    four = placement_kwargs(parse_hf_args({"pretrained": "m", "load_in_4bit": "true"}), cuda)
    assert four["device_map"] == {"": "cuda:0"} and four["quantization_config"].load_in_4bit
    given = '{"load_in_8bit": true, "llm_int8_threshold": 5.0}'
    eight = placement_kwargs(parse_hf_args({"pretrained": "m", "quantization_config": given}), cuda)
    config = eight["quantization_config"]
    assert config.load_in_8bit and not config.load_in_4bit and config.llm_int8_threshold == 5.0
    method = '{"quant_method": "bitsandbytes", "load_in_4bit": true}'
    auto = placement_kwargs(parse_hf_args({"pretrained": "m", "quantization_config": method}), cuda)
    assert auto["quantization_config"].load_in_4bit
    typo = parse_hf_args({"pretrained": "m", "quantization_config": '{"load_in_4bits": true}'})
    with pytest.raises(ConfigError, match="'load_in_4bits', which bitsandbytes does not take"):
        placement_kwargs(typo, cuda)
