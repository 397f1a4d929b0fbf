"""build_requests: what a model is asked for a doc, from a task's request plan."""

from __future__ import annotations

import pytest

from assay.doc import Doc, OutputType
from assay.errors import ConfigError
from assay.prompts.manager import PromptManager
from assay.requests.build import build_requests, repeated
from assay.requests.plan import Capabilities, GenerationPolicy, RequestPlan
from assay.requests.types import GenerateRequest, GenParams, LoglikelihoodRequest
from assay.run.plan import generation_policy


def characters(texts):
    return [len(t) for t in texts]


def doc_with_examples() -> Doc:
    examples = [Doc(f"E{i}", [c], 0) for i, c in ((1, "x"), (2, "y"), (3, "z"))]
    return Doc("Q", ["a", "bb"], 0, fewshot_samples=examples)


def plan(output_type: OutputType, generation_kwargs=None, truncate=True) -> RequestPlan:
    return RequestPlan(
        "task t",
        output_type,
        PromptManager(),
        GenerationPolicy(generation_kwargs, "\n\n"),
        truncate_fewshots=truncate,
    )


def test_truncation_drops_examples_from_the_end_without_changing_the_doc():
    doc = doc_with_examples()
    # Three examples: "E1 x\n\nE2 y\n\nE3 z\n\nQ" is 19 characters, two are 13; the longest
    # choice ("bb") needs 2 more, so a 16-character window holds two examples.
    caps = Capabilities(token_counter=characters, max_length=16)
    requests = [i.request for i in build_requests(plan(OutputType.MULTIPLE_CHOICE), doc, caps)]
    assert requests == [
        LoglikelihoodRequest("E1 x\n\nE2 y\n\nQ", " a"),
        LoglikelihoodRequest("E1 x\n\nE2 y\n\nQ", " bb"),
    ]
    assert len(doc.fewshot_samples) == 3


def test_truncation_keeps_room_for_the_generation():
    doc = doc_with_examples()
    kwargs = {"until": ["\n"], "max_gen_toks": 4}
    # 13 + 4 > 16 drops a second example; 7 ("E1 x\n\nQ") + 4 fits.
    caps = Capabilities(token_counter=characters, max_length=16)
    (instance,) = build_requests(plan(OutputType.GENERATE_UNTIL, kwargs), doc, caps)
    assert instance.request.prompt == "E1 x\n\nQ"
    assert instance.request.params.max_gen_toks == 4


def test_truncation_needs_a_backend_that_counts_tokens():
    with pytest.raises(ConfigError, match=r"task t: truncate_fewshots needs .* no model does not"):
        build_requests(plan(OutputType.MULTIPLE_CHOICE), doc_with_examples())
    untruncated = build_requests(
        plan(OutputType.MULTIPLE_CHOICE, truncate=False), doc_with_examples()
    )
    assert untruncated[0].request.context == "E1 x\n\nE2 y\n\nE3 z\n\nQ"


def test_sampled_generations_repeat_with_their_index_greedy_ones_alike():
    sampled = GenerateRequest("p", GenParams(until=("\n",), do_sample=True, temperature=0.5))
    assert [r.sample_index for r in repeated(sampled, 3)] == [0, 1, 2]
    greedy = GenerateRequest("p", GenParams(until=("\n",)))
    assert repeated(greedy, 3) == [greedy, greedy, greedy]
    scored = LoglikelihoodRequest("c", " x")
    assert repeated(scored, 2) == [scored, scored]


def image_doc() -> Doc:
    from PIL import Image

    shot = Doc("<image>E1", ["x"], 0, images=[Image.new("RGB", (2, 2), "blue")])
    pictures = [Image.new("RGB", (3, 2), "red"), Image.new("RGB", (3, 2), "green")]
    return Doc("<image><image>Q", ["a", "bb"], 0, images=pictures, fewshot_samples=[shot])


def test_the_docs_own_images_go_with_every_request_pmi_ones_included():
    from assay.images import DocImage

    doc = image_doc()
    expected = tuple(DocImage(i) for i in doc.images)
    mc = RequestPlan(
        "task t",
        OutputType.MULTIPLE_CHOICE,
        PromptManager(),
        GenerationPolicy(None, "\n\n"),
        with_unconditioned=True,
    )
    instances = build_requests(mc, doc)
    assert len(instances) == 4
    # few-shot examples' images are not sent (lm-eval shows only the doc's)
    assert all(inst.request.images == expected for inst in instances)
    assert instances[0].request.context == "<image>E1 x\n\n<image><image>Q"
    generated = build_requests(plan(OutputType.GENERATE_UNTIL, truncate=False), doc)
    assert generated[0].request.images == expected
    sampled = GenerateRequest("p", GenParams(do_sample=True, temperature=1.0), images=expected)
    assert all(r.images == expected for r in repeated(sampled, 2))


def test_images_are_recorded_by_reference_in_arguments():
    doc = image_doc()
    args = build_requests(plan(OutputType.GENERATE_UNTIL, truncate=False), doc)[0].arguments()
    refs = args["arg_2"]["visual"]
    assert [r["size"] for r in refs] == [[3, 2], [3, 2]]
    assert len({r["sha256"] for r in refs}) == 2
    text_only = build_requests(plan(OutputType.GENERATE_UNTIL, truncate=False), Doc("Q", ["a"]))
    assert "arg_2" not in text_only[0].arguments()


def test_a_text_only_backend_refuses_docs_with_images():
    caps = Capabilities(backend="HFLM", accepts_images=False)
    with pytest.raises(ConfigError, match=r"doc 7 has 2 image.*HFLM backend takes text only"):
        build_requests(
            plan(OutputType.MULTIPLE_CHOICE, truncate=False), _with_id(image_doc()), caps
        )


def test_rolling_loglikelihood_refuses_images():
    from assay.errors import TaskConfigError

    with pytest.raises(TaskConfigError, match="loglikelihood_rolling scores text alone"):
        build_requests(plan(OutputType.LOGLIKELIHOOD_ROLLING, truncate=False), image_doc())


def _with_id(doc: Doc) -> Doc:
    doc.id = "7"
    return doc


def test_tasks_in_lightevals_layout_generate_with_lightevals_length_rule():
    from assay.tasks.config import TaskConfig

    doc = Doc("Q", ["a"], 0, generation_size=32768)
    for layout, fitted in (("lighteval", True), ("lm_eval", False)):
        config = TaskConfig(
            "t", lambda row, name: doc, prompt_layout=layout, metrics=["exact_match"]
        )
        policy = generation_policy(config)
        kwargs = policy.gen_kwargs(doc)
        assert kwargs.get("fit_context", False) is fitted
        assert policy.params(kwargs).fit_context is fitted and kwargs["max_gen_toks"] == 32768
    # --gen-kwargs still has the last word.
    config = TaskConfig(
        "t", lambda row, name: doc, prompt_layout="lighteval", metrics=["exact_match"]
    )
    policy = generation_policy(config, {"fit_context": False})
    assert not policy.params(policy.gen_kwargs(doc)).fit_context
