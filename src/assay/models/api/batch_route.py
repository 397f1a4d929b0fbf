"""An API backend's calls sent through its provider's batch API (`batch_api=true`).

`run_batch` builds a `batches.BatchRun` from the backend's settings (journal folders, polling,
resubmits, what to do with requests an earlier run's batches left unanswered) and turns what the
batches answer into a `runner.CallOutcome`, as the online path returns: each answer counted at
the batch price, read, and, with `landing`, put in the run's response cache as its batch
downloads, before the whole chunk is done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from assay.models.api.batch_journal import JOURNAL_FOLDER, BatchJournal
from assay.models.api.batches import BatchProvider, BatchRun
from assay.models.api.runner import CallOutcome, PermanentFailure
from assay.models.api.settings import APISettings

R = TypeVar("R")


def run_batch(
    provider: BatchProvider,
    settings: APISettings,
    n_calls: int,
    create_args: Callable[[int], dict[str, Any]],
    read: Callable[[int, dict[str, Any]], R],
    *,
    record: Callable[[dict[str, Any]], object],
    land: Callable[[Any], str] | None,
    landing: Sequence[Any] | None,
    cache: Any,
    watch: Callable[[BatchRun | None], None],
) -> CallOutcome[R]:
    """`read(j, body)` for every call j, whose SDK arguments are `create_args(j)`.

    `record(body)` counts an answer's usage; call j answers request `landing[j]`, whose cache
    key is `land(landing[j])`, and it enters `cache` (a `ResponseCache`, or None); `watch` is told of the batch run while it
    is waited for (None once it is over).
    """
    outcome: CallOutcome[R] = CallOutcome([None] * n_calls)

    def deliver(arrived: dict[int, dict[str, Any]]) -> None:
        # Each answer once (calls sharing a body share it), at the batch price.
        for body in {id(b): b for b in arrived.values()}.values():
            record(body)
        landed: list[tuple[str, Any]] = []
        for j, body in arrived.items():
            try:
                outcome.answers[j] = read(j, body)
            except ValueError as exc:  # pydantic's ValidationError included
                outcome.failures[j] = f"the batch answer is malformed: {exc}"
            except PermanentFailure as exc:
                outcome.failures[j] = exc.reason
            else:
                if land is not None and landing is not None:
                    landed.append((land(landing[j]), outcome.answers[j]))
        if cache is not None and landed:
            cache.put_many(landed)

    s = settings
    folders = [Path(s.batch_dir)] if s.batch_dir else []
    if s.batch_cache:
        folders.append(Path(s.batch_cache).parent / JOURNAL_FOLDER)
    run = BatchRun(
        provider,
        BatchJournal(folders),
        poll_interval=s.batch_poll_interval,
        resubmits=s.batch_resubmits,
        on_failed="stop" if s.batch_failed == "stop" else "resubmit",
    )
    watch(run)
    try:
        failures = run.run(n_calls, lambda j: flat_body(create_args(j)), deliver)
    finally:
        watch(None)
    outcome.failures.update(failures)
    return outcome


def flat_body(args: dict[str, Any]) -> dict[str, Any]:
    """An SDK call's keyword arguments as the JSON body it sends (`extra_body` merged in)."""
    body = {k: v for k, v in args.items() if k != "extra_body"}
    body.update(args.get("extra_body") or {})
    return body
