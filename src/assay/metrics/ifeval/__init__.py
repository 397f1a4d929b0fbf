"""IFEval: Google's instruction-following checkers and the four IFEval metrics.

A task builds each doc's `specific` with `specific_from_row(row)` and calls
`ensure_ifeval_resources()` when it is validated; the metrics then read `doc.specific` and
the generated text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from assay.doc import OutputType
from assay.errors import DataError
from assay.metrics.base import (
    Aggregation,
    Metric,
    SampleInput,
    register_aggregation,
    register_metric,
)
from assay.metrics.ifeval._registry import INSTRUCTION_CONFLICTS, INSTRUCTION_DICT
from assay.metrics.ifeval._resources import ensure_ifeval_resources
from assay.metrics.ifeval.scoring import (
    InputExample,
    OutputExample,
    score_response,
    score_specific,
    specific_from_row,
    test_instruction_following_loose,
    test_instruction_following_strict,
)

__all__ = [
    "INSTRUCTION_CONFLICTS",
    "INSTRUCTION_DICT",
    "InputExample",
    "OutputExample",
    "ensure_ifeval_resources",
    "inst_level_acc",
    "score_response",
    "score_specific",
    "specific_from_row",
    "test_instruction_following_loose",
    "test_instruction_following_strict",
]


def inst_level_acc(per_sample: Sequence[Sequence[bool]]) -> float:
    """Instruction-level accuracy: the mean over all instructions of all prompts."""
    flat = [followed for sample in per_sample for followed in sample]
    return sum(flat) / len(flat)


register_aggregation(Aggregation("inst_level_acc", inst_level_acc, stderr="flat_mean"))


def _verdicts(sample: SampleInput) -> tuple[OutputExample, OutputExample]:
    doc = sample.doc
    if not doc.specific:
        raise DataError(
            f"task {doc.task_name!r}, doc {doc.id!r}: IFEval metrics need the doc's `specific` "
            "built by assay.metrics.ifeval.specific_from_row(row)"
        )
    response = sample.response
    if isinstance(response, list):
        # Like lm-eval, score the first of several kept responses.
        response = response[0] if response else ""
    if not isinstance(response, str):
        raise DataError(
            f"task {doc.task_name!r}, doc {doc.id!r}: IFEval metrics score generated text, "
            f"got {type(response).__name__}"
        )
    return score_specific(doc.specific, response)


def _prompt_level_strict(sample: SampleInput) -> bool:
    return _verdicts(sample)[0].follow_all_instructions


def _inst_level_strict(sample: SampleInput) -> list[bool]:
    return _verdicts(sample)[0].follow_instruction_list


def _prompt_level_loose(sample: SampleInput) -> bool:
    return _verdicts(sample)[1].follow_all_instructions


def _inst_level_loose(sample: SampleInput) -> list[bool]:
    return _verdicts(sample)[1].follow_instruction_list


def _metric(name: str, sample_fn: Callable[[SampleInput], Any], aggregation: str) -> Metric:
    return Metric(
        name,
        sample_fn,
        aggregation,
        higher_is_better=True,
        output_types=frozenset({OutputType.GENERATE_UNTIL}),
    )


@register_metric("prompt_level_strict_acc", output_type=OutputType.GENERATE_UNTIL)
def prompt_level_strict_acc() -> Metric:
    """Share of prompts whose every instruction is followed by the response as generated."""
    return _metric("prompt_level_strict_acc", _prompt_level_strict, "mean")


@register_metric("inst_level_strict_acc", output_type=OutputType.GENERATE_UNTIL)
def inst_level_strict_acc() -> Metric:
    """Share of instructions followed by the response as generated."""
    return _metric("inst_level_strict_acc", _inst_level_strict, "inst_level_acc")


@register_metric("prompt_level_loose_acc", output_type=OutputType.GENERATE_UNTIL)
def prompt_level_loose_acc() -> Metric:
    """Share of prompts whose every instruction is followed by some loose variant."""
    return _metric("prompt_level_loose_acc", _prompt_level_loose, "mean")


@register_metric("inst_level_loose_acc", output_type=OutputType.GENERATE_UNTIL)
def inst_level_loose_acc() -> Metric:
    """Share of instructions followed by some loose variant of the response."""
    return _metric("inst_level_loose_acc", _inst_level_loose, "inst_level_acc")
