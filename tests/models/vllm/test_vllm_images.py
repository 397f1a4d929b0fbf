"""`--model vllm` with images: request translation, on machines without vLLM.

What vLLM receives is checked on a recording engine: each token-id prompt with its
`multi_modal_data` (the doc's images, decoded, at most `max_images`), the `<image>` placeholders
turned into the model's image token, and loglikelihoods read from the end of prompt
log-probabilities that vLLM lengthened by expanding each image into many tokens.
"""

from __future__ import annotations

import pytest

from assay.errors import ConfigError, ModelError
from assay.images import DocImage
from assay.models.vllm.engine import engine_prompts
from assay.models.vllm.model import VLLMLM
from assay.models.vllm.requests import (
    SCORING_PARAMS,
    EngineGeneration,
    PromptScores,
    engine_kwargs,
    image_prompt_text,
    multi_modal_data,
    parse_vllm_args,
)
from assay.requests.types import GenerateRequest, GenParams, LoglikelihoodRequest


def _picture(shade: int, size: tuple[int, int] = (4, 3)):
    from PIL import Image

    return Image.new("RGB", size, (shade, 0, 0))


RED, DARK, DARKER = (DocImage(_picture(s)) for s in (250, 120, 10))


def _args(**given):
    return parse_vllm_args({"pretrained": "some/vlm", **given})


# -- pure translation -----------------------------------------------------------------------


def test_placeholders_become_the_image_token():
    args = _args(image_token="<img_tok>")
    assert image_prompt_text("A <image> B <image>", [RED, DARK], args) == "A <img_tok> B <img_tok>"
    assert image_prompt_text("A <image>", [RED], _args()) == "A <image>"


def test_max_images_keeps_the_first_images_and_removes_later_placeholders():
    args = _args(max_images=1, image_token="<img_tok>")
    text = image_prompt_text("<image>, <image> and <image>", [RED, DARK, DARKER], args)
    # lm-eval's replace_placeholders: later placeholders stay as text, unless the image token
    # is `<image>` itself, when they vanish.
    assert text == "<img_tok>, <image> and <image>"
    assert image_prompt_text("<image>, <image>", [RED, DARK], _args(max_images=1)) == "<image>, "
    data = multi_modal_data([RED, DARK, DARKER], args)
    assert data is not None and len(data["image"]) == 1
    assert data["image"][0].tobytes() == _picture(250).tobytes()
    assert multi_modal_data([], args) is None


def test_placeholders_and_images_must_pair_up():
    with pytest.raises(ModelError, match=r"1 <image> placeholder\(s\) for 2 image"):
        image_prompt_text("<image> only", [RED, DARK], _args())


def test_a_prompt_without_placeholders_is_left_for_the_model_to_place_its_images():
    assert (
        image_prompt_text("What colour?", [RED], _args(image_token="<img_tok>")) == "What colour?"
    )


def test_max_images_sets_vllms_limit_mm_per_prompt():
    assert "limit_mm_per_prompt" not in engine_kwargs(_args())
    assert engine_kwargs(_args(max_images=3))["limit_mm_per_prompt"] == {"image": 3}
    # Without max_images, the limit may be given to vLLM directly (other modalities too).
    limits = {"image": 2, "video": 0}
    given = _args(engine_args={"limit_mm_per_prompt": limits})
    assert engine_kwargs(given)["limit_mm_per_prompt"] == limits
    with pytest.raises(ConfigError, match="limit_mm_per_prompt"):
        _args(max_images=2, engine_args={"limit_mm_per_prompt": limits})
    with pytest.raises(ConfigError, match="max_images"):
        _args(max_images=0)


def test_engine_prompts_carry_multi_modal_data_beside_the_token_ids():
    media = [None, {"image": ["pixels"]}]
    assert engine_prompts(dict, [[1, 2], [3]], media) == [
        {"prompt_token_ids": [1, 2]},
        {"prompt_token_ids": [3], "multi_modal_data": {"image": ["pixels"]}},
    ]
    assert engine_prompts(dict, [[1]], None) == [{"prompt_token_ids": [1]}]


# -- the backend on a recording engine ------------------------------------------------------


class RecordingEngine:
    """Answers generation with fixed ids, and prompt log-probabilities with each image
    expanded into `expansion` extra positions, as vLLM's multimodal processor lengthens the
    prompt; records every call's arguments."""

    max_model_len = 64
    prefix_block_size = 4
    """Prompts with images never read the prefix cache, whatever its blocks."""

    def __init__(self, expansion: int = 5) -> None:
        self.expansion = expansion
        self.calls: list[tuple] = []

    def generate(self, prompts, params, *media):
        self.calls.append(("generate", prompts, params, *media))
        return [EngineGeneration([prompt[-1]], "length", None) for prompt in prompts]

    def prompt_logprobs(self, prompts, params, *media):
        self.calls.append(("prompt_logprobs", prompts, params, *media))
        images = media[0] if media else [None] * len(prompts)
        out = []
        for ids, data in zip(prompts, images, strict=True):
            extra = self.expansion * len(data["image"]) if data else 0
            # Position k (of the expanded prompt) gets log-probability -k for its token id, and
            # token 0 is always the most likely, so no continuation here is greedy.
            expanded = [0] * extra + list(ids)
            entries = [None, *({tok: -float(k), 0: 0.0} for k, tok in enumerate(expanded) if k)]
            out.append(PromptScores(entries, 0))
        return out


@pytest.fixture()
def backend(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)

    def make(**given):
        args = parse_vllm_args({"pretrained": str(tiny_model_dir), **given})
        return VLLMLM(args, engine=RecordingEngine(), tokenizer=tokenizer)

    return make


def test_generation_sends_each_prompt_with_its_images(backend):
    lm = backend(image_token="[IMG]")
    params = GenParams(max_gen_toks=4)
    requests = [
        GenerateRequest("The village <image> sat", params, images=(RED,)),
        GenerateRequest("The village", params),
        GenerateRequest("<image> and <image>", params, images=(DARK, DARKER)),
    ]
    lm.generate_until(requests)
    [(_, prompts, _, media)] = lm.engine.calls
    sent = {
        lm.tokenizer.decode(ids, skip_special_tokens=True): None
        if data is None
        else [img.getpixel((0, 0))[0] for img in data["image"]]
        for ids, data in zip(prompts, media, strict=True)
    }
    assert sent == {
        "The village [IMG] sat": [250],
        "The village": None,
        "[IMG] and [IMG]": [120, 10],
    }


def test_a_text_only_call_reaches_the_engine_as_before(backend):
    lm = backend()
    lm.generate_until([GenerateRequest("The village", GenParams(max_gen_toks=2))])
    lm.loglikelihood([LoglikelihoodRequest("The village", " sat")])
    assert [len(call) for call in lm.engine.calls] == [3, 3]  # no media argument


def test_loglikelihood_reads_the_continuation_from_the_end_of_the_expanded_prompt(backend):
    lm = backend(image_token="<s>")
    plain = LoglikelihoodRequest("The village <s> sat at", " the bottom")
    pictured = LoglikelihoodRequest("The village <image> sat at", " the bottom", images=(RED,))
    (text,), (image,) = lm.loglikelihood([plain]), lm.loglikelihood([pictured])
    ids = lm.engine.calls[0][1][0]
    n_cont = len(lm.tokenizer(" the bottom", add_special_tokens=False).input_ids)
    positions = range(len(ids) - n_cont, len(ids))
    # Same token ids either way; the image's 5 extra positions shift every log-probability.
    assert lm.engine.calls[1][1][0] == ids
    assert lm.engine.calls[1][2] == [SCORING_PARAMS]  # images keep vLLM off its prefix cache
    assert text.logprob == -float(sum(positions))
    assert image.logprob == -float(sum(k + 5 for k in positions))
    assert not image.is_greedy


def test_the_same_text_with_other_images_is_scored_apart(backend):
    lm = backend()
    requests = [
        LoglikelihoodRequest("<image> sat at", " the", images=(RED,)),
        LoglikelihoodRequest("<image> sat at", " the", images=(DARK,)),
        LoglikelihoodRequest("<image> sat at", " the", images=(RED,)),
    ]
    lm.loglikelihood(requests)
    [(_, prompts, _, media)] = lm.engine.calls
    assert len(prompts) == 2
    assert sorted(d["image"][0].getpixel((0, 0))[0] for d in media) == [120, 250]


def test_a_prompt_with_images_is_refused_rather_than_cut(backend):
    lm = backend()
    long = "<image>" + " the village" * 40
    with pytest.raises(ModelError, match="not cut"):
        lm.generate_until([GenerateRequest(long, GenParams(max_gen_toks=8), images=(RED,))])
    with pytest.raises(ModelError, match="not cut"):
        lm.loglikelihood([LoglikelihoodRequest(long, " end", images=(RED,))])


def test_image_settings_enter_identity_only_when_set(backend):
    assert "max_images" not in backend().identity()
    identity = backend(max_images=2, image_token="<s>").identity()
    assert identity["max_images"] == 2 and identity["image_token"] == "<s>"


def test_the_engine_refusing_a_prompt_with_images_is_a_model_error(monkeypatch):
    import sys
    from types import SimpleNamespace

    from assay.models.vllm.engine import run_engine

    monkeypatch.setitem(
        sys.modules, "vllm", SimpleNamespace(SamplingParams=dict, TokensPrompt=dict)
    )

    def generate(prompts, sampling, use_tqdm):
        raise ValueError("Attempted to assign 2 = 8 multimodal tokens to 0 placeholders")

    llm = SimpleNamespace(generate=generate)
    with pytest.raises(ModelError, match="engine refused a prompt with images: Attempted"):
        run_engine(llm, [[1, 2]], [{}], [{"image": ["pixels"]}])
    with pytest.raises(ValueError):  # a text prompt's failure is not the input's fault
        run_engine(llm, [[1, 2]], [{}])
