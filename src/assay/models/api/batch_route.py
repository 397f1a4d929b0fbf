"""An API backend's calls sent through its provider's batch API (`batch_api=true`).

`BatchRoute` is the part of a backend that sends through the batch API: the provider's batch
endpoints (on the session's synchronous client, within the batch_max_* args), the batch run
being waited for (shown on the live progress line), and the response cache that answers enter
as they download. `run_batch` builds a `batches.BatchRun` from the backend's settings (journal folders, polling,
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
from assay.models.api.online_route import OnlineCalls
from assay.models.api.runner import CallOutcome, PermanentFailure
from assay.models.api.settings import APISettings
from assay.util.redact import redact_url

R = TypeVar("R")


class BatchRoute:
    """One backend's calls through its provider's batch API, sharing the key, clients and usage
    meter of its online `calls`; `identity()` is the backend's, which keys the landing cache."""

    def __init__(self, calls: OnlineCalls, identity: Callable[[], dict[str, Any]]) -> None:
        self.calls = calls
        self.identity = identity
        self.running: BatchRun | None = None
        """The batch run being waited for, while one is."""
        self._landing: Any = None
        """The response cache that batch answers enter as they download, once opened."""

    def run(
        self,
        n_calls: int,
        endpoint: str,
        create_args: Callable[[int], dict[str, Any]],
        answer: Callable[[int, Any], R],
        landing: Sequence[Any] | None = None,
        land: Callable[[Any], str] | None = None,
    ) -> CallOutcome[R]:
        """`answer(j, response)` for every call j, whose SDK arguments are `create_args(j)`;
        with `landing`, call j's answer enters the response cache under `land(landing[j])` as
        its batch downloads."""
        if n_calls == 0:
            return CallOutcome([])
        calls = self.calls
        calls.require_key()
        calls.provider.sdk(calls.name)  # a missing SDK is named with this backend

        def read(j: int, body: dict[str, Any]) -> R:
            return answer(j, calls.provider.typed_answer(body, endpoint))

        return run_batch(
            self.provider(endpoint),
            calls.settings,
            n_calls,
            create_args,
            read,
            record=lambda body: calls.meter.record(
                calls.provider.usage(body.get("usage")), batch=True
            ),
            land=land if landing is not None else None,
            landing=landing,
            cache=self._landing_cache() if landing is not None else None,
            watch=self._watch,
        )

    def provider(self, endpoint: str) -> BatchProvider:
        """The provider's batch API for requests to `endpoint`, within the batch_max_* args."""
        calls = self.calls
        s, limits = calls.settings, calls.provider.batch_limits
        return calls.provider.batch_provider(
            calls.session.sync_client(),
            redact_url(s.base_url),  # names the batches in messages and journals
            endpoint,
            type(limits)(
                s.batch_max_requests or limits.max_requests, s.batch_max_bytes or limits.max_bytes
            ),
        )

    def _watch(self, run: BatchRun | None) -> None:
        self.running = run

    def _landing_cache(self) -> Any:
        """The response cache named by batch_cache (opened once), or None without one."""
        if self._landing is None and self.calls.settings.batch_cache:
            from assay.requests.cache import ResponseCache

            self._landing = ResponseCache(self.calls.settings.batch_cache, self.identity())
        return self._landing


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
    key is `land(landing[j])`, and it enters `cache` (a `ResponseCache`, or None); `watch` is
    told of the batch run while it is waited for (None once it is over).
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
