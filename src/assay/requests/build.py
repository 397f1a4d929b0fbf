"""build_requests: the one place that decides what a model is asked for a doc.

`assay run` calls it for every doc, `assay tasks show` for the first one, so what is shown is
what runs. It is pure: the doc is not changed (few-shot examples dropped by truncate_fewshots
are dropped from the prompt only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from assay.doc import Doc, OutputType
from assay.errors import ConfigError, DataError
from assay.prompts.chat import render_chat
from assay.requests.instances import Instance, doc_instances
from assay.requests.plan import Capabilities, RequestPlan
from assay.requests.types import GenerateRequest, Request


def check_images_accepted(task: str, doc: Doc, backend: str, accepts_images: bool) -> None:
    """Refuse a doc with images for a text-only backend, which would drop them."""
    if doc.images and not accepts_images:
        raise ConfigError(
            f"{task}: doc {doc.id} has {len(doc.images)} image(s), but the {backend} backend "
            "takes text only and would drop them. Evaluate this task with a multimodal backend "
            "(--model hf-multimodal, openai-chat, vllm)."
        )


def build_requests(
    plan: RequestPlan, doc: Doc, capabilities: Capabilities | None = None
) -> list[Instance]:
    """The requests of `doc` under `plan`, for a backend with `capabilities`.

    Multiple choice: one loglikelihood per choice (plus the unconditioned ones for PMI);
    loglikelihood: one; loglikelihood_rolling: the doc's text; generate_until: one generation
    with the doc's settings (`doc_instances` says which exactly).
    """
    caps = capabilities or Capabilities()
    check_images_accepted(plan.task, doc, caps.backend, caps.accepts_images)
    if doc.conversation is not None:
        return _conversation_instances(plan, doc, caps)
    generative = plan.output_type == OutputType.GENERATE_UNTIL
    gen_kwargs = plan.generation.gen_kwargs(doc) if generative else None
    params = plan.generation.params(gen_kwargs) if gen_kwargs is not None else None
    fewshots: Sequence[Doc] = doc.fewshot_samples
    rendered = None
    if plan.truncate_fewshots and fewshots:
        reserve = params.max_gen_toks if params is not None else None
        fewshots, rendered = _fit_fewshots(plan, doc, caps, reserve)
    if plan.output_type == OutputType.MULTIPLE_CHOICE and doc.shared_continuation is not None:
        prompt: Any = plan.prompts.contexts(doc, fewshots)
    elif plan.output_type == OutputType.LOGLIKELIHOOD_ROLLING:
        prompt = None
    else:
        prompt = rendered if rendered is not None else plan.prompts.render(doc, fewshots)
    return doc_instances(
        doc,
        plan.output_type,
        prompt,
        continuation_delimiter=plan.prompts.continuation_delimiter(doc),
        params=params,
        with_unconditioned=plan.with_unconditioned,
        gen_kwargs=gen_kwargs,
    )


def _conversation_instances(plan: RequestPlan, doc: Doc, caps: Capabilities) -> list[Instance]:
    """The one generation of a doc that brings its own conversation (and maybe tools).

    A backend that accepts tools gets the turns themselves; otherwise, when the doc offers no
    tools, a chat API gets them as messages and a model with a chat template (applied) gets
    them rendered. Anything else would change the prompt, and is refused.
    """
    assert doc.conversation is not None
    where = f"{plan.task}: doc {doc.id}"
    if plan.output_type != OutputType.GENERATE_UNTIL:
        raise ConfigError(f"{where} gives a conversation, which only generate_until can ask.")
    if doc.tools and not caps.accepts_tools:
        raise ConfigError(
            f"{where} offers {len(doc.tools)} tool(s), but the {caps.backend} backend does not "
            "take tools. Run it with a backend that does (replay, or a chat backend with tool "
            "support), or the task's prompt-mode variant."
        )
    prompt: Any
    if caps.accepts_tools:
        prompt = doc.conversation
    elif plan.prompts.api_messages:
        prompt = tuple((turn.role, turn.content) for turn in doc.conversation)
    elif plan.prompts.chat_template is not None:
        prompt = render_chat(
            plan.prompts.chat_template,
            [{"role": turn.role, "content": turn.content} for turn in doc.conversation],
        )
    else:
        raise ConfigError(
            f"{where} is a chat conversation (system and user turns), which {caps.backend} "
            "cannot take as plain text without changing it. Add --apply-chat-template (a model "
            "with a chat template, or a chat API)."
        )
    gen_kwargs = plan.generation.gen_kwargs(doc)
    params = plan.generation.params(gen_kwargs)
    request = GenerateRequest(prompt, params, 0, tools=doc.tools)
    return [Instance(0, request, gen_kwargs=gen_kwargs)]


def _fit_fewshots(
    plan: RequestPlan, doc: Doc, caps: Capabilities, reserve: int | None
) -> tuple[Sequence[Doc], Any]:
    """truncate_fewshots: drop examples from the end until the prompt fits the model.

    Returns the examples kept and the prompt they render to (None when none are kept). The
    room kept free is the generation length, or the longest choice for scored requests.
    """
    counter, max_length = caps.token_counter, caps.max_length
    if counter is None or max_length is None:
        raise ConfigError(
            f"{plan.task}: truncate_fewshots needs a backend that counts tokens "
            f"(hf, vllm, or an API backend with a tokenizer); {caps.backend} does not."
        )

    def count(text: str) -> int:
        return counter([text])[0]

    if reserve is None:
        reserve = max((count(c) for c in doc.choices), default=0)
    fewshots = doc.fewshot_samples
    while fewshots:
        prompt = plan.prompts.render(doc, fewshots)
        text = prompt if isinstance(prompt, str) else " ".join(c for _, c in prompt)
        if count(text) + reserve <= max_length:
            return fewshots, prompt
        fewshots = fewshots[:-1]
    return fewshots, None


def follow_up_request(
    plan: RequestPlan, doc: Doc, first: Request, exchanges: Sequence[tuple[str, str]]
) -> GenerateRequest:
    """The request of a doc's next follow-up turn: the conversation so far (`exchanges`: each
    earlier answer of the model and the user turn that followed it) with the generation
    settings of the doc's first request."""
    if not isinstance(first, GenerateRequest):
        raise DataError(
            f"doc {doc.id or '?'} of task {plan.task}: follow-up turns need a generation task "
            "(output_type generate_until)."
        )
    prompt = plan.prompts.render_follow_up(doc, doc.fewshot_samples, exchanges)
    return GenerateRequest(prompt, first.params, first.sample_index)


def repeated(request: Request, times: int) -> list[Request]:
    """A request asked `times` times (a doc's num_samples): sampled generations get their repeat
    index, so that each is its own sample; any other request is the same each time (and is
    computed once)."""
    if isinstance(request, GenerateRequest) and request.params.do_sample:
        return [replace(request, sample_index=k) for k in range(times)]
    return [request] * times
