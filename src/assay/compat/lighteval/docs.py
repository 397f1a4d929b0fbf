"""lighteval's Doc and assay's, converted both ways (a prompt function's result; what
lighteval's metrics receive)."""

from __future__ import annotations

from typing import Any

from assay.doc import Doc, SamplingMethod
from assay.errors import TaskConfigError

_DOC_FIELDS = (
    "query",
    "choices",
    "gold_index",
    "instruction",
    "images",
    "specific",
    "unconditioned_query",
    "original_query",
    "id",
    "fewshot_sorting_class",
    "use_logits",
)
"""lighteval Doc fields copied as they are onto assay's Doc."""


def doc_from_lighteval(doc: Any, where: str) -> Doc:
    """An assay Doc with the fields of lighteval's Doc `doc`.

    `task_name`, `generation_size`, `stop_sequences` and `num_samples` are left unset: lighteval
    overwrites them from the task config after the prompt function, and so do assay's task
    defaults. `fewshot_samples` are converted too; `sampling_methods` map by value.
    """
    if getattr(doc, "generation_grammar", None) is not None:
        raise TaskConfigError(
            f"{where}: the prompt function's Doc sets generation_grammar, which needs a "
            "grammar-constrained server (TGI); no assay backend can honour it."
        )
    fields = {name: getattr(doc, name) for name in _DOC_FIELDS}
    fields["choices"] = list(fields["choices"] or [])
    fields["id"] = str(fields["id"] or "")
    return Doc(
        **fields,
        sampling_methods=[SamplingMethod(str(m.value)) for m in doc.sampling_methods],
        fewshot_samples=[doc_from_lighteval(d, where) for d in doc.fewshot_samples],
    )


def doc_to_lighteval(doc: Doc, task_name: str) -> Any:
    """lighteval's Doc for assay's `doc`, as lighteval's metrics receive it (`task_name` is
    lighteval's full name, `name|k`)."""
    from lighteval.tasks.requests import Doc as LightevalDoc
    from lighteval.tasks.requests import SamplingMethod as LightevalSampling

    return LightevalDoc(
        **{name: getattr(doc, name) for name in _DOC_FIELDS},
        task_name=task_name,
        fewshot_samples=[doc_to_lighteval(d, task_name) for d in doc.fewshot_samples],
        sampling_methods=[LightevalSampling(str(m)) for m in doc.sampling_methods],
        generation_size=doc.generation_size,
        stop_sequences=doc.stop_sequences,
        num_samples=doc.num_samples or 1,
    )
