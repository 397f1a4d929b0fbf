"""Instances: the requests of one doc, with where each belongs (request index, repeat)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from assay.doc import Doc, OutputType
from assay.errors import TaskConfigError
from assay.images import DocImage, as_doc_images
from assay.requests.tools import conversation_record
from assay.requests.types import (
    GenerateRequest,
    GenParams,
    LoglikelihoodRequest,
    Request,
    RollingRequest,
)


@dataclass(frozen=True, slots=True)
class Instance:
    """One request of one doc."""

    index: int
    """Position among the doc's requests (the choice for multiple choice)."""
    request: Request
    unconditioned: bool = False
    """A PMI request: log P(choice | the doc's unconditioned_query, default "")."""
    gen_kwargs: dict[str, Any] | None = None
    """generate_until: the settings as the task states them, which samples files record (as
    lm-eval does); None records the normalised parameters."""

    def arguments(self) -> dict[str, Any]:
        """lm-eval's `arguments` entry for samples files; a multimodal request's images follow
        as lm-eval's `{"visual": [...]}` argument, each named by its ImageRef."""
        r = self.request
        if isinstance(r, RollingRequest):
            return {"arg_0": r.text}
        if isinstance(r, LoglikelihoodRequest):
            out: dict[str, Any] = {"arg_0": r.context, "arg_1": r.continuation}
        else:
            out = {
                "arg_0": conversation_record(r.prompt),
                "arg_1": self.gen_kwargs if self.gen_kwargs is not None else r.params.as_dict(),
            }
        if r.images:
            out["arg_2"] = {"visual": [image.reference() for image in r.images]}
        if isinstance(r, GenerateRequest) and (r.tools or r.tool_choice is not None):
            # Only requests that offer tools carry these, so other samples files are unchanged.
            out["tools"] = [spec.as_dict() for spec in r.tools]
            out["tool_choice"] = r.tool_choice
        return out


def doc_instances(
    doc: Doc,
    output_type: OutputType,
    prompt: Any,
    *,
    continuation_delimiter: str,
    params: GenParams | None,
    with_unconditioned: bool,
    gen_kwargs: dict[str, Any] | None = None,
) -> list[Instance]:
    """The requests lm-eval builds for a doc, given its rendered prompt(s).

    multiple_choice: one loglikelihood per choice (contexts per choice for multiple-input docs),
    plus log P(choice | unconditioned_query or "") per choice for PMI. loglikelihood: the
    continuation is the target, without delimiter. generate_until: one request per sample
    (greedy samples are identical and computed once).

    The doc's own images go with every request, the PMI ones included (as lm-eval sends them);
    few-shot examples' images do not (lm-eval shows only the doc's).
    """
    images = tuple(doc_images(doc))
    if output_type == OutputType.MULTIPLE_CHOICE:
        if doc.shared_continuation is not None:
            cont = continuation_delimiter + doc.shared_continuation
            out = [
                Instance(i, LoglikelihoodRequest(ctx, cont, images)) for i, ctx in enumerate(prompt)
            ]
        else:
            out = [
                Instance(i, LoglikelihoodRequest(prompt, continuation_delimiter + c, images))
                for i, c in enumerate(doc.choices)
            ]
        if with_unconditioned:
            conts = [r.request.continuation for r in out]  # type: ignore[union-attr]
            # The context for PMI is the doc's unconditioned query, if it has one; lm-eval's is empty.
            context = doc.unconditioned_query or ""
            out += [
                Instance(len(out) + i, LoglikelihoodRequest(context, c, images), True)
                for i, c in enumerate(conts)
            ]
        return out
    if output_type == OutputType.LOGLIKELIHOOD:
        return [Instance(0, LoglikelihoodRequest(prompt, doc.choices[0], images))]
    if output_type == OutputType.LOGLIKELIHOOD_ROLLING:
        if images:
            raise TaskConfigError(
                f"task {doc.task_name!r}, doc {doc.id}: loglikelihood_rolling scores text "
                "alone and the doc has images (no backend scores the likelihood of an image, "
                "lm-eval's hf-multimodal refuses it too). Use another output_type, or drop the "
                "images."
            )
        return [Instance(0, RollingRequest(doc.query))]
    assert params is not None
    return [Instance(0, GenerateRequest(prompt, params, 0, images), gen_kwargs=gen_kwargs)]


def doc_images(doc: Doc) -> list[DocImage]:
    """The doc's images as DocImages (tasks convert them when they build the doc; a Doc made
    by hand may still hold raw sources)."""
    if not doc.images:
        return []
    if all(isinstance(image, DocImage) for image in doc.images):
        return list(doc.images)
    return as_doc_images(doc.images, f"task {doc.task_name!r}, doc {doc.id}: images")
