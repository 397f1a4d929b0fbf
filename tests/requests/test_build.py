"""build_requests: what a model is asked for a doc, from a task's request plan."""

from __future__ import annotations

import pytest

from assay.doc import Doc, OutputType
from assay.errors import ConfigError
from assay.prompts.manager import PromptManager
from assay.requests.build import build_requests, repeated
from assay.requests.plan import Capabilities, GenerationPolicy, RequestPlan
from assay.requests.types import GenerateRequest, GenParams, LoglikelihoodRequest


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
