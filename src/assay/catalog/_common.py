"""Shared pieces of the built-in catalog: Docs built the way lm-eval 0.4.13 builds them.

Each helper mirrors how an lm-eval YAML's doc_to_text / doc_to_target / doc_to_choice become a
Doc for one output type (the same mapping as `assay.tasks.lm_eval_yaml`), so a catalog task
renders byte-identical prompts: the description is the Doc's `instruction` (placed once before
the few-shot examples), the query never repeats it, and `specific["target"]` is lm-eval's
`str(doc_to_target(doc))` as written in samples files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from assay.doc import Doc

Row = dict[str, Any]

LM_EVAL_DEFAULTS: dict[str, Any] = {"instruction_in_query": False}
"""TaskConfig settings every lm-eval-style catalog task shares."""


def choice_doc(
    query: str,
    choices: list[str],
    gold: int | list[int],
    *,
    target: Any = None,
    instruction: str | None = None,
) -> Doc:
    """A multiple_choice doc: one loglikelihood per choice after `query`.

    `target` is what lm-eval's doc_to_target returned (default: the gold index).
    """
    return Doc(
        query=query,
        choices=list(choices),
        gold_index=gold,
        instruction=instruction or None,
        specific={"target": str(gold if target is None else target)},
    )


def multiple_input_doc(
    contexts: list[str], gold: int, continuation: str, *, instruction: str | None = None
) -> Doc:
    """A multiple_choice doc whose choices are alternative contexts for one continuation
    (lm-eval's "multiple input" tasks, such as winogrande)."""
    return Doc(
        query="",
        choices=list(contexts),
        gold_index=gold,
        shared_continuation=continuation,
        instruction=instruction or None,
        specific={"target": continuation},
    )


def generation_doc(
    query: str, target: str | list[str], *, instruction: str | None = None, **specific: Any
) -> Doc:
    """A generate_until doc; a list target means several acceptable answers (the first one is
    the few-shot answer)."""
    golds = [str(t) for t in target] if isinstance(target, list) else [str(target)]
    return Doc(
        query=query,
        choices=golds,
        gold_index=list(range(len(golds))) if len(golds) > 1 else 0,
        instruction=instruction or None,
        specific={"target": str(target), **specific},
    )


def loglikelihood_doc(query: str, continuation: str) -> Doc:
    """A loglikelihood doc: log P(continuation | query), continuation taken as is."""
    return Doc(query=query, choices=[continuation], gold_index=0, specific={"target": continuation})


def rolling_doc(text: str) -> Doc:
    """A loglikelihood_rolling doc: the whole text is scored."""
    return Doc(query=text, choices=[], specific={"target": text})


def map_rows(fn: Callable[[Row], Row]) -> Callable[[Iterable[Row]], list[Row]]:
    """process_docs that adds `fn(row)`'s fields to each row (as `datasets.Dataset.map` does:
    existing columns keep their place, new ones come after)."""

    def process(rows: Iterable[Row]) -> list[Row]:
        return [{**row, **fn(row)} for row in rows]

    process.__doc__ = fn.__doc__
    return process


def filter_rows(keep: Callable[[Row], bool]) -> Callable[[Iterable[Row]], list[Row]]:
    """process_docs that keeps the rows for which `keep` is true."""

    def process(rows: Iterable[Row]) -> list[Row]:
        return [row for row in rows if keep(row)]

    return process


EXAMPLE_PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x04\x00\x00\x00\x04\x08\x02\x00\x00\x00&"
    b"\x93\t)\x00\x00\x00\x14IDATx\x9cc<\xa1\xa1\xc1\x00\x03L\x0cH\x007\x07\x008T\x01 $\xefzk"
    b"\x00\x00\x00\x00IEND\xaeB`\x82"
)
"""A 4x4 red PNG: the image of bundled example rows of image tasks (`assay tasks show`)."""
