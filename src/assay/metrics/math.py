"""math_verify: symbolic equivalence of a generated answer and the gold, via Math-Verify.

As in lm-eval's MATH tasks, both the gold and the whole response are parsed with
`math_verify.parse` (LaTeX and plain expressions) and compared with `math_verify.verify`.
"""

from __future__ import annotations

import threading
from typing import Any

from assay.doc import OutputType
from assay.errors import DataError
from assay.metrics._options import reject_unknown
from assay.metrics.base import Metric, SampleInput, register_metric

TIMEOUT_SECONDS = 5
"""Math-Verify's own default limit per parse and per comparison."""


def _timeout() -> int | None:
    # Math-Verify enforces its limits with SIGALRM, which only the main thread may use; in
    # worker threads parsing runs without a limit rather than failing.
    return TIMEOUT_SECONDS if threading.current_thread() is threading.main_thread() else None


def answers_match(gold: str, prediction: str) -> bool:
    """Whether `prediction` states an answer mathematically equal to `gold`'s."""
    from math_verify import parse, verify

    limit = _timeout()
    return bool(
        verify(
            gold=parse(gold, parsing_timeout=limit),
            target=parse(prediction, parsing_timeout=limit),
            timeout_seconds=limit,
        )
    )


def _math_verify(sample: SampleInput) -> int:
    response = sample.response
    if not isinstance(response, str):
        raise DataError(
            f"doc {sample.doc.id!r} of task {sample.doc.task_name!r}: math_verify needs one "
            f"text response, got {type(response).__name__}; add a take_first filter"
        )
    return int(any(answers_match(gold, response) for gold in sample.doc.get_golds()))


@register_metric("math_verify", output_type=OutputType.GENERATE_UNTIL)
def math_verify(**options: Any) -> Metric:
    """1 if the response's answer is equivalent to a gold (Math-Verify), else 0; mean."""
    reject_unknown("math_verify", options)
    return Metric(
        name="math_verify",
        sample_fn=_math_verify,
        aggregation="mean",
        higher_is_better=True,
        output_types=frozenset({OutputType.GENERATE_UNTIL}),
    )
