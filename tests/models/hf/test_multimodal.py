"""hf-multimodal (assay/models/hf/multimodal.py) on the tiny LLaVA model.

Scores are checked against a naive reference written here: the processor encodes the text with
its images, one plain forward pass, log_softmax, gather. Generation is checked against a
token-by-token argmax loop of the model fed the same pixels.
"""

from __future__ import annotations

import pytest
from fixtures.tiny_vlm import draw_image

from assay.errors import ConfigError, ModelError
from assay.images import DocImage
from assay.models.base import MODELS
from assay.models.hf.multimodal import hf_multimodal, parse_multimodal_args
from assay.requests.types import GenerateRequest, GenParams, LoglikelihoodRequest

TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def lm(tiny_vlm_dir):
    return hf_multimodal(pretrained=str(tiny_vlm_dir), batch_size=3)


def pictures(*indices):
    return tuple(DocImage(draw_image(i)) for i in indices)


def naive_score(lm, context, continuation, images):
    """log P(continuation | context, images) with lm-eval's split, one unbatched forward pass."""
    import torch

    processor, model = lm.processor, lm.model
    loaded = [i.load() for i in images]
    context_ids = list(processor(text=[context], images=loaded)["input_ids"][0])
    whole = processor(text=[context + continuation], images=loaded, return_tensors="pt")
    ids = whole["input_ids"][0].tolist()
    cont = ids[len(context_ids) :]
    with torch.no_grad():
        logits = model(
            input_ids=whole["input_ids"][:, :-1], pixel_values=whole["pixel_values"]
        ).logits
    logprobs = torch.log_softmax(logits[0, -len(cont) :].float(), -1)
    picked = logprobs[torch.arange(len(cont)), torch.tensor(cont)]
    greedy = logprobs.argmax(-1).tolist() == cont
    return float(picked.sum()), greedy


def naive_generate(lm, prompt, images, max_new):
    import torch

    encoded = lm.processor(text=[prompt], images=[i.load() for i in images], return_tensors="pt")
    ids, out = encoded["input_ids"], []
    with torch.no_grad():
        for _ in range(max_new):
            logits = lm.model(input_ids=ids, pixel_values=encoded["pixel_values"]).logits
            token = int(logits[0, -1].argmax())
            if token == lm.tokenizer.eos_token_id:
                break
            out.append(token)
            ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
    return lm.tokenizer.decode(out, skip_special_tokens=True)


def test_registered_as_lm_evals_name():
    assert "hf-multimodal" in MODELS.names()


def test_scores_match_one_plain_forward_pass_and_depend_on_the_image(lm):
    requests = [
        LoglikelihoodRequest("<image>What colour is the shape?", " red", pictures(0)),
        LoglikelihoodRequest("<image>What colour is the shape?", " blue", pictures(0)),
        LoglikelihoodRequest("<image>What colour is the shape?", " red", pictures(1)),
        LoglikelihoodRequest("Look: <image> and <image> ", "which one", pictures(2, 3)),
        LoglikelihoodRequest("no image here:", " 10 100", ()),
    ]
    got = lm.loglikelihood(requests)
    for request, (logprob, greedy) in zip(requests[:4], got, strict=False):
        expected = naive_score(
            lm,
            request.context.rstrip(),
            request.context[len(request.context.rstrip()) :] + request.continuation,
            request.images,
        )
        assert logprob == pytest.approx(expected[0], abs=TOLERANCE)
        assert greedy == expected[1]
    assert abs(got[0].logprob - got[2].logprob) > 1e-3  # another picture, another score


def test_generation_matches_a_greedy_loop_with_the_same_pixels(lm):
    params = GenParams(until=("\n\n",), max_gen_toks=8)
    requests = [
        GenerateRequest("<image>What colour is the shape?", params, images=pictures(i))
        for i in range(4)
    ] + [GenerateRequest("Look: <image> and <image>", params, images=pictures(5, 6))]
    got = [g.text for g in lm.generate_until(requests)]
    for request, text in zip(requests, got, strict=True):
        expected = naive_generate(lm, request.prompt, request.images, 8).split("\n\n")[0]
        assert text == expected
    assert len(set(got[:4])) > 1  # the pictures change what is said


def test_max_images_keeps_the_first_images_and_drops_later_placeholders(tiny_vlm_dir, lm):
    one = hf_multimodal(pretrained=str(tiny_vlm_dir), max_images=1)
    two_images = LoglikelihoodRequest("A <image> B <image> C:", " red", pictures(0, 1))
    # lm-eval's rule for an image token equal to the placeholder: later placeholders vanish
    first_only = LoglikelihoodRequest("A <image> B  C:", " red", pictures(0))
    assert one.loglikelihood([two_images])[0].logprob == pytest.approx(
        lm.loglikelihood([first_only])[0].logprob, abs=TOLERANCE
    )


def test_image_resizing_is_applied_before_the_processor(tiny_vlm_dir, lm):
    small = hf_multimodal(pretrained=str(tiny_vlm_dir), image_max_side=10)
    image = draw_image(3)  # 40 x 32
    shrunk = DocImage(image.resize((10, 8)))
    request = LoglikelihoodRequest("<image>Colour:", " red", (DocImage(image),))
    reference = LoglikelihoodRequest("<image>Colour:", " red", (shrunk,))
    assert small.loglikelihood([request])[0].logprob == pytest.approx(
        lm.loglikelihood([reference])[0].logprob, abs=TOLERANCE
    )
    assert small.identity() != lm.identity()


def test_chat_template_turns_placeholders_into_image_parts(tiny_vlm_dir, lm):
    messages = [{"role": "user", "content": "Look <image> then <image>!"}]
    assert lm.chat_template()(messages) == "<s><|user|>\nLook <image> then <image>!<|assistant|>\n"
    flat = hf_multimodal(pretrained=str(tiny_vlm_dir), interleave=False, max_images=1)
    assert flat.chat_template()(messages) == "<s><|user|>\n<image>Look  then !<|assistant|>\n"


def test_a_prompt_without_placeholders_for_its_images_is_refused(lm):
    request = GenerateRequest("What colour?", GenParams(max_gen_toks=2), images=pictures(0))
    with pytest.raises(ModelError, match="Each image needs one `<image>` in the prompt"):
        lm.generate_until([request])


def test_empty_context_with_images_is_refused(lm):
    with pytest.raises(ModelError, match="empty context"):
        lm.loglikelihood([LoglikelihoodRequest("", " red", pictures(0))])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"image_max_side": "20", "image_width": "10"}, "give one of them"),
        ({"max_images": "0"}, "max_images"),
        ({"peft": "x"}, "peft"),
        ({}, "pretrained"),
    ],
)
def test_bad_model_args_are_refused_before_loading(args, message):
    with pytest.raises(ConfigError, match=message):
        parse_multimodal_args({"pretrained": "some/model", **args} if args else {})


def test_a_python_task_with_pil_images_runs_end_to_end(tiny_vlm_dir, tmp_path, lm):
    import json

    from assay import Doc, TaskConfig
    from assay.run.evaluation import Evaluation
    from assay.run.settings import RunSettings
    from assay.tasks.registry import Resolved, TaskRequest

    rows = [{"picture": draw_image(i), "label": i % 2} for i in range(4)]

    def prompt(row, task_name):
        return Doc("<image>Which colour?", ["red", "blue"], row["label"], images=[row["picture"]])

    config = TaskConfig(
        name="colors",
        prompt_function=prompt,
        dataset_loader=lambda **_: {"validation": rows},
        metrics=["acc"],
    )
    settings = RunSettings(
        model="hf-multimodal",
        model_args={"pretrained": str(tiny_vlm_dir)},
        output_dir=tmp_path,
        log_samples=True,
        show_progress=False,
    )
    results = Evaluation(Resolved([TaskRequest(config)]), settings).run()
    records = [json.loads(x) for x in (tmp_path / "samples_colors.jsonl").read_text().splitlines()]
    hits = 0
    for row, record in zip(rows, records, strict=True):
        scores = [
            naive_score(lm, "<image>Which colour?", c, (DocImage(row["picture"]),))[0]
            for c in (" red", " blue")  # lm-eval's layout: the target delimiter, then the choice
        ]
        ours = [float(r[0][0]) for r in record["resps"]]
        assert ours == pytest.approx(scores, abs=TOLERANCE)
        hits += scores.index(max(scores)) == row["label"]
    assert results["results"]["colors"]["acc,none"] == pytest.approx(hits / len(rows))


def test_a_request_with_images_too_long_for_the_window_is_refused_not_cut(tiny_vlm_dir):
    short = hf_multimodal(pretrained=str(tiny_vlm_dir), max_length=24)
    long_text = "<image>" + " the river" * 12
    with pytest.raises(ModelError, match="cutting it would drop image tokens"):
        short.generate_until(
            [GenerateRequest(long_text, GenParams(max_gen_toks=4), images=pictures(0))]
        )
    with pytest.raises(ModelError, match="cutting it would drop image tokens"):
        short.loglikelihood([LoglikelihoodRequest(long_text, " red", pictures(0))])
