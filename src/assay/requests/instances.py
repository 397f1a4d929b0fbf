"""Instances: the requests of one doc, with where each belongs (request index, repeat)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from assay.doc import Doc, OutputType
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
        """lm-eval's `arguments` entry for samples files."""
        r = self.request
        if isinstance(r, LoglikelihoodRequest):
            return {"arg_0": r.context, "arg_1": r.continuation}
        if isinstance(r, RollingRequest):
            return {"arg_0": r.text}
        prompt = (
            r.prompt
            if isinstance(r.prompt, str)
            else [dict(role=a, content=b) for a, b in r.prompt]
        )
        return {
            "arg_0": prompt,
            "arg_1": self.gen_kwargs if self.gen_kwargs is not None else r.params.as_dict(),
        }


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
    """
    if output_type == OutputType.MULTIPLE_CHOICE:
        if doc.shared_continuation is not None:
            cont = continuation_delimiter + doc.shared_continuation
            out = [Instance(i, LoglikelihoodRequest(ctx, cont)) for i, ctx in enumerate(prompt)]
        else:
            out = [
                Instance(i, LoglikelihoodRequest(prompt, continuation_delimiter + c))
                for i, c in enumerate(doc.choices)
            ]
        if with_unconditioned:
            conts = [r.request.continuation for r in out]  # type: ignore[union-attr]
            # lighteval's context for PMI is the doc's unconditioned query; lm-eval's is empty.
            context = doc.unconditioned_query or ""
            out += [
                Instance(len(out) + i, LoglikelihoodRequest(context, c), True)
                for i, c in enumerate(conts)
            ]
        return out
    if output_type == OutputType.LOGLIKELIHOOD:
        return [Instance(0, LoglikelihoodRequest(prompt, doc.choices[0]))]
    if output_type == OutputType.LOGLIKELIHOOD_ROLLING:
        return [Instance(0, RollingRequest(doc.query))]
    assert params is not None
    return [Instance(0, GenerateRequest(prompt, params, 0), gen_kwargs=gen_kwargs)]
