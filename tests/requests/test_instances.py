"""Instances: the requests lm-eval builds for a doc, and their samples-file arguments."""

from __future__ import annotations

from assay.doc import Doc, OutputType
from assay.requests.instances import doc_instances
from assay.requests.types import GenerateRequest, GenParams, LoglikelihoodRequest, RollingRequest


def test_multiple_choice_one_loglikelihood_per_choice_with_delimiter():
    doc = Doc("Q?", choices=["yes", "no"], gold_index=0)
    out = doc_instances(
        doc,
        OutputType.MULTIPLE_CHOICE,
        "Q?",
        continuation_delimiter=" ",
        params=None,
        with_unconditioned=False,
    )
    assert [i.request for i in out] == [
        LoglikelihoodRequest("Q?", " yes"),
        LoglikelihoodRequest("Q?", " no"),
    ]
    assert [i.index for i in out] == [0, 1]
    assert out[1].arguments() == {"arg_0": "Q?", "arg_1": " no"}


def test_unconditioned_requests_for_pmi_follow_the_conditioned_ones():
    doc = Doc("Q?", choices=["a", "b"], gold_index=1)
    out = doc_instances(
        doc,
        OutputType.MULTIPLE_CHOICE,
        "Q?",
        continuation_delimiter=" ",
        params=None,
        with_unconditioned=True,
    )
    assert [i.unconditioned for i in out] == [False, False, True, True]
    assert [i.request for i in out[2:]] == [
        LoglikelihoodRequest("", " a"),
        LoglikelihoodRequest("", " b"),
    ]
    assert [i.index for i in out] == [0, 1, 2, 3]


def test_unconditioned_requests_use_the_docs_unconditioned_query_when_set():
    doc = Doc("Q: sky?\nAnswer:", choices=["blue", "red"], unconditioned_query="Answer:")
    out = doc_instances(
        doc,
        OutputType.MULTIPLE_CHOICE,
        "Q: sky?\nAnswer:",
        continuation_delimiter=" ",
        params=None,
        with_unconditioned=True,
    )
    assert [i.request for i in out[2:]] == [
        LoglikelihoodRequest("Answer:", " blue"),
        LoglikelihoodRequest("Answer:", " red"),
    ]


def test_multiple_input_docs_score_the_shared_continuation_after_each_context():
    doc = Doc("", choices=["c1", "c2"], gold_index=0, shared_continuation="end")
    out = doc_instances(
        doc,
        OutputType.MULTIPLE_CHOICE,
        ["P c1", "P c2"],
        continuation_delimiter=" ",
        params=None,
        with_unconditioned=False,
    )
    assert [i.request for i in out] == [
        LoglikelihoodRequest("P c1", " end"),
        LoglikelihoodRequest("P c2", " end"),
    ]


def test_loglikelihood_rolling_and_generate():
    doc = Doc("the text", choices=["gold"])
    (ll,) = doc_instances(
        doc,
        OutputType.LOGLIKELIHOOD,
        "ctx",
        continuation_delimiter=" ",
        params=None,
        with_unconditioned=False,
    )
    assert ll.request == LoglikelihoodRequest("ctx", "gold")  # no delimiter: lm-eval's rule
    (rolling,) = doc_instances(
        doc,
        OutputType.LOGLIKELIHOOD_ROLLING,
        None,
        continuation_delimiter=" ",
        params=None,
        with_unconditioned=False,
    )
    assert rolling.request == RollingRequest("the text")
    assert rolling.arguments() == {"arg_0": "the text"}
    params = GenParams(until=("\n",), max_gen_toks=5)
    (gen,) = doc_instances(
        doc,
        OutputType.GENERATE_UNTIL,
        "prompt",
        continuation_delimiter=" ",
        params=params,
        with_unconditioned=False,
        gen_kwargs={"until": ["\n"], "max_gen_toks": 5, "custom": True},
    )
    assert gen.request == GenerateRequest("prompt", params, 0)
    # Samples record the task's gen_kwargs as stated, not the normalised parameters.
    assert gen.arguments()["arg_1"] == {"until": ["\n"], "max_gen_toks": 5, "custom": True}


def test_chat_prompts_are_written_as_role_content_dicts():
    (gen,) = doc_instances(
        Doc("q", choices=["a"]),
        OutputType.GENERATE_UNTIL,
        (("system", "s"), ("user", "u")),
        continuation_delimiter="",
        params=GenParams(),
        with_unconditioned=False,
    )
    args = gen.arguments()
    assert args["arg_0"] == [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert args["arg_1"] == GenParams().as_dict()
