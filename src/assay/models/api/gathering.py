"""Per request, the answers of its calls: what a backend returns once its calls are over.

A request may need several calls (a rolling loglikelihood's windows), and calls may be shared by
requests (duplicates are sent once): `owners[i]` lists the calls of request i. A request with a
missing answer fails the whole call to the backend (`APIRequestError`), or stops it under
`--max-cost` (`CostLimitReached`), the answers that did arrive kept in the error's `partial`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from assay.models.api.budget import CostLimitReached, SpendingLimit
from assay.models.api.runner import APIRequestError, CallOutcome

R = TypeVar("R")


def gather(
    outcome: CallOutcome[Any],
    owners: list[list[int]],
    combine: Callable[[list[Any]], R],
    *,
    backend: str,
    server: str,
    what: str,
    hint: str,
    spending: SpendingLimit | None,
) -> list[R]:
    """Per request, `combine` of its calls' answers; an APIRequestError naming `backend` and
    the (redacted) `server` if any is missing (CostLimitReached when `spending` kept them from
    being sent, or cannot be kept)."""
    if spending is not None and spending.unknown:
        _refuse_unknown_cost(spending, outcome, owners, combine, backend, what)
    if outcome.ok:
        return [combine([outcome.answers[j] for j in calls]) for calls in owners]
    abandoned = set(outcome.abandoned) | set(outcome.unsent)
    failures: dict[int, str] = {}
    missing: list[int] = []
    partial: list[Any] = []
    for i, calls in enumerate(owners):
        reasons = [outcome.failures[j] for j in calls if j in outcome.failures]
        if reasons:
            failures[i] = reasons[0]
        elif any(j in abandoned for j in calls):
            missing.append(i)
        complete = not reasons and not any(j in abandoned for j in calls)
        partial.append(combine([outcome.answers[j] for j in calls]) if complete else None)
    if not failures and outcome.unsent and spending is not None:
        raise CostLimitReached(
            f"--max-cost {spending.max_usd:g} USD reached: this invocation's API requests "
            f"cost {spending.spent:.6f} USD, and {len(missing)} of {len(owners)} "
            f"{what} request(s) of --model {backend} were not sent (each was estimated "
            "at the dearest answer so far, before any at its prompt and max new "
            "tokens). The answers that arrived are in the response cache: re-run with a "
            "larger --max-cost to continue from there.",
            partial,
        )
    summary = (
        f"--model {backend}: {len(failures)} of {len(owners)} {what} request(s) to {server} failed"
    )
    raise APIRequestError(summary, failures, missing, partial, hint)


def _refuse_unknown_cost(
    spending: SpendingLimit,
    outcome: CallOutcome[Any],
    owners: list[list[int]],
    combine: Callable[[list[Any]], Any],
    backend: str,
    what: str,
) -> None:
    """Stop the run under --max-cost once an answer's cost is unknown: the budget cannot
    be kept. The answers that arrived are kept (CostLimitReached's `partial`)."""
    lost = set(outcome.failures) | set(outcome.abandoned) | set(outcome.unsent)
    partial = [
        combine([outcome.answers[j] for j in calls]) if not any(j in lost for j in calls) else None
        for calls in owners
    ]
    unsent = sum(1 for p in partial if p is None)
    raise CostLimitReached(
        f"--max-cost {spending.max_usd:g} USD cannot be kept: {spending.unknown}, so what "
        f"the requests of --model {backend} cost is unknown; the run stopped "
        f"({unsent} of {len(owners)} {what} request(s) not answered). Re-run without "
        "--max-cost to go on without a budget, or use a server that reports usage. The "
        "answers that arrived are in the response cache.",
        partial,
    )
