"""Provider batch APIs: many requests sent as one job, answered within a day at half the price.

`BatchRun.run` turns request bodies into provider batches and follows them to the end:

- requests are split to the provider's per-batch limits (`BatchLimits`: requests and bytes);
- every batch id is written to a journal (`batch_journal.BatchJournal`, one small JSON file
  per batch, named after it, in each of its folders) as soon as the provider returns it, so a
  run that stops (an exit, a crash, `kill -9`) polls the same batches when it is run again
  instead of paying twice;
- a journal file that cannot be read still names its batch: the provider is asked what it
  holds (OpenAI: its input file; Anthropic: its results, once it has ended, nothing being
  submitted before then), and the journal is repaired;
- each request's custom id is a digest of where it goes and its exact body, so a re-run finds
  its requests in the journal whatever order it builds them in;
- answers are handed over (`deliver`) as each batch's results download;
- items that expired, were cancelled, went missing or failed for a transient reason (429,
  5xx) are submitted again, at most `resubmits` more times; the rest are reported per request;
- an ended batch's state and the requests it left unanswered go into its journal record, so
  that a re-run submits those again (`on_failed="resubmit"`) or reports them without sending
  (`"stop"`) rather than following a dead batch forever.

The engine knows nothing of HTTP: a `BatchProvider` (see `batch_providers`) does the talking,
so the bookkeeping is tested against fakes.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from assay.models.api.batch_journal import JOURNAL_FOLDER, BatchJournal

FAILED_CHOICES = ("resubmit", "stop")
"""What a re-run does with requests an earlier run's batches left unanswered (--batch-failed)."""
OnFailed = Literal["resubmit", "stop"]


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """The most one batch may hold."""

    max_requests: int
    max_bytes: int
    """Bytes of the batch's input as uploaded (JSONL lines, newlines included)."""


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """A batch as the provider describes it at one poll."""

    state: str
    """The provider's own word: validating, in_progress, finalizing, completed, ended ..."""
    ended: bool
    """Whether its results are final (whatever became of each request)."""
    counts: Mapping[str, int] = field(default_factory=dict)
    """Requests per outcome so far (completed, failed, succeeded, errored, expired ...)."""
    problem: str | None = None
    """Why the provider rejected the whole batch (its input failed validation), if it did."""
    created: float | None = None
    """When the provider created it (seconds since the epoch), where it says: orders a batch
    recovered from an unreadable journal file among the others."""


@dataclass(frozen=True, slots=True)
class ItemResult:
    """What became of one request of a finished batch."""

    response: dict[str, Any] | None
    """The answer's JSON body, when there is one."""
    reason: str = ""
    """Why there is no answer."""
    retryable: bool = False
    """Whether submitting the request again may succeed (expired, cancelled, 429, 5xx)."""


class BatchProvider(Protocol):
    """One provider's batch endpoints (OpenAI's /v1/batches, Anthropic's message batches)."""

    name: str
    """How messages name it ("OpenAI Batch API at https://...")."""
    route: str
    """Where its requests go (base URL and endpoint): part of each request's custom id."""
    limits: BatchLimits

    def check(self) -> None:
        """Raise a ModelError when the server has no batch API (asked before any request)."""
        ...

    def line(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """One request as its batch input holds it."""
        ...

    def submit(self, lines: list[bytes]) -> str:
        """Create a batch of serialized lines (`line` as JSON); its id."""
        ...

    def status(self, batch_id: str) -> BatchStatus | None:
        """The batch now; None when the provider no longer knows it."""
        ...

    def results(self, batch_id: str) -> Iterator[tuple[str, ItemResult]]:
        """(custom id, result) of every request of an ended batch."""
        ...

    def contents(self, batch_id: str) -> tuple[str, list[str]] | None:
        """(route, custom ids) of a batch the provider knows, read back from it before it
        ends (OpenAI keeps the input file); None where the provider cannot tell."""
        ...


def custom_id(route: str, body: Mapping[str, Any]) -> str:
    """The id of a request: 64 hex digits of its route and exact body (Anthropic's limit)."""
    text = json.dumps([route, body], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def split_batches(lines: Sequence[bytes], limits: BatchLimits) -> list[list[int]]:
    """Consecutive positions of `lines`, cut so no batch exceeds `limits`.

    A line larger than `max_bytes` on its own is a ValueError: no batch can hold it.
    """
    parts: list[list[int]] = []
    current: list[int] = []
    size = 0
    for i, line in enumerate(lines):
        cost = len(line) + 1
        if cost > limits.max_bytes:
            raise ValueError(
                f"one request is {cost} bytes, more than a batch may hold ({limits.max_bytes})"
            )
        if current and (len(current) >= limits.max_requests or size + cost > limits.max_bytes):
            parts.append(current)
            current, size = [], 0
        current.append(i)
        size += cost
    if current:
        parts.append(current)
    return parts


@dataclass
class _Ended:
    """What an ended batch gave: answers, requests to submit again, requests lost for good
    (each with why), and every custom id its results name."""

    state: str
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    again: dict[str, str] = field(default_factory=dict)
    lost: dict[str, str] = field(default_factory=dict)
    held: list[str] = field(default_factory=list)


@dataclass
class BatchRun:
    """Sends request bodies through a provider's batch API and waits for their answers."""

    provider: BatchProvider
    journal: BatchJournal
    poll_interval: float = 30.0
    """Seconds between two looks at the unfinished batches."""
    resubmits: int = 2
    """Further submissions of a request whose answer expired, was cancelled or failed
    transiently; 0 never submits twice."""
    on_failed: OnFailed = "resubmit"
    """What becomes of requests that a batch of an earlier run left unanswered (the batch
    failed, expired or was cancelled, or refused them): submitted again (`resubmit`), or
    reported as failed without being sent (`stop`)."""
    report: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr))
    """Where the progress lines go (one per poll)."""
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    status_line: str | None = None
    """The latest progress line (for a live display), None before the first poll."""

    def run(
        self,
        n_calls: int,
        body: Callable[[int], dict[str, Any]],
        deliver: Callable[[dict[int, dict[str, Any]]], None],
    ) -> dict[int, str]:
        """Answer calls 0..n_calls-1 whose request bodies `body(j)` gives.

        `deliver` receives each downloaded batch's answers (call index to the answer's JSON
        body) as they arrive. Returns the calls that have no answer, with the reason.
        """
        provider = self.provider
        provider.check()
        owners: dict[str, list[int]] = {}
        lines: dict[str, bytes] = {}
        for j in range(n_calls):
            request = body(j)
            cid = custom_id(provider.route, request)
            owners.setdefault(cid, []).append(j)
            if cid not in lines:
                lines[cid] = json.dumps(provider.line(cid, request)).encode()
        failed: dict[str, str] = {}
        submissions: dict[str, int] = {}

        def submit() -> None:
            active.update(self._submit(queue, lines))
            for cid in queue:
                submissions[cid] = submissions.get(cid, 0) + 1
            queue.clear()

        def may_submit() -> bool:
            # A batch of unknown contents may hold any queued request: none is sent before
            # its results have said which it holds.
            return bool(queue) and not any(ids is None for ids in active.values())

        # From reading the journal to recording the first batches, another run sharing the
        # journal waits: it then follows these batches rather than submitting them again.
        with self.journal.locked():
            # Batches of unreadable journal files whose contents only their results tell.
            active: dict[str, list[str] | None] = dict.fromkeys(self._recover())
            queue = self._earlier(set(owners), active, failed)
            submissions.update({cid: 1 for ids in active.values() for cid in ids or ()})
            if may_submit():
                submit()
        started = self.clock()
        while queue or active:
            if not queue:  # nothing left that a batch of unknown contents could answer
                active = {batch_id: ids for batch_id, ids in active.items() if ids is not None}
            if may_submit():
                with self.journal.locked():
                    submit()
            waited = self.clock() - started
            latest: dict[str, BatchStatus] = {}
            for batch_id in list(active):
                status = provider.status(batch_id)
                if status is not None and not status.ended:
                    latest[batch_id] = status
                    continue
                ids = active.pop(batch_id)
                wanted = set(queue if ids is None else ids)
                ended = self._collect(batch_id, status, wanted, contents_known=ids is not None)
                if ids is None:
                    settled = ended.answers.keys() | ended.again.keys() | ended.lost.keys()
                    queue[:] = [cid for cid in queue if cid not in settled]
                self.journal.record(
                    provider.name,
                    provider.route,
                    batch_id,
                    ended.held if ids is None else ids,
                    ended=ended.state,
                    unanswered={**ended.again, **ended.lost},
                    created=status.created if status is not None else None,
                )
                deliver({j: answer for cid, answer in ended.answers.items() for j in owners[cid]})
                failed.update(ended.lost)
                for cid, reason in ended.again.items():
                    times = submissions.setdefault(cid, 1)
                    if times <= self.resubmits:
                        queue.append(cid)
                    else:
                        failed[cid] = f"{reason} (submitted {times} time{'s' * (times > 1)})"
            self._progress(latest, active, waited)
            if active and not may_submit():
                self.sleep(self.poll_interval)
        return {j: reason for cid, reason in failed.items() for j in owners[cid]}

    def _earlier(
        self, ids: set[str], active: dict[str, list[str] | None], failed: dict[str, str]
    ) -> list[str]:
        """Follow the batches of earlier runs that hold some of `ids` (into `active`); their
        requests those batches left unanswered are submitted again or, with on_failed="stop",
        go into `failed`. The requests to submit now."""
        provider = self.provider
        journaled = self.journal.find(provider.route, ids)
        followed = 0
        dead: dict[str, list[str]] = {}
        for cid, where in journaled.items():
            if where.unanswered is None:
                known = active.setdefault(where.batch_id, [])
                if known is not None:
                    known.append(cid)
                    followed += 1
            else:
                dead.setdefault(where.batch_id, []).append(cid)
        if followed:
            batches = sum(1 for v in active.values() if v)
            self.report(
                f"{provider.name}: following {batches} batch(es) submitted earlier "
                f"({followed} request(s)); nothing is sent twice"
            )
        for batch_id, cids in dead.items():
            reason = journaled[cids[0]].unanswered
            said = f"{provider.name}: batch {batch_id} of an earlier run left {len(cids)} request(s) unanswered ({reason})"
            if self.on_failed == "stop":
                self.report(f"{said}; not submitted again (--batch-failed stop)")
                for cid in cids:
                    failed[cid] = (
                        f"{journaled[cid].unanswered} (batch {batch_id}, an earlier run; not "
                        "submitted again with --batch-failed stop: re-run with --batch-failed "
                        "resubmit to send it)"
                    )
            else:
                self.report(f"{said}; submitting them again")
        waiting = {cid for v in active.values() for cid in v or ()}
        return [cid for cid in ids if cid not in waiting and cid not in failed]

    def _recover(self) -> list[str]:
        """Ask the provider about the batch of each unreadable journal file (its name gives the
        id). A batch the provider can describe is written back into the journal, and followed
        as any other; the ids returned are those whose requests only their results will tell."""
        provider = self.provider
        unknown = []
        for lost in self.journal.unreadable():
            where = ", ".join(str(p) for p in lost.paths)
            said = f"{provider.name}: the batch journal {where} cannot be read"
            status = provider.status(lost.batch_id)
            if status is None:
                self.report(
                    f"{said}, and batch {lost.batch_id}, which its name gives, is not known to "
                    "this provider: nothing to follow, the file is left as it is"
                )
                continue
            contents = provider.contents(lost.batch_id)
            if contents is not None:
                route, ids = contents
                self.journal.record(
                    provider.name, route, lost.batch_id, ids, created=status.created
                )
                self.report(
                    f"{said}; batch {lost.batch_id} ({status.state}) told its {len(ids)} "
                    "request(s) and the journal was repaired: they are followed, not sent again"
                )
                continue
            if status.ended:
                self.report(
                    f"{said}; batch {lost.batch_id} has ended ({status.state}): its results "
                    "are downloaded, and what they answer is not sent again"
                )
            else:
                self.report(
                    f"{said}; batch {lost.batch_id} is {status.state}, and which requests it "
                    "holds is known only once it ends: nothing is submitted before then, so "
                    "nothing is paid twice (if it is not this run's batch, cancel it at the "
                    "provider or delete the file)"
                )
            unknown.append(lost.batch_id)
        return unknown

    def _submit(self, queue: list[str], lines: dict[str, bytes]) -> dict[str, list[str] | None]:
        """Submit the queued requests in batches within the limits; batch id to its ids."""
        provider = self.provider
        created: dict[str, list[str] | None] = {}
        for part in split_batches([lines[cid] for cid in queue], provider.limits):
            ids = [queue[i] for i in part]
            batch_id = provider.submit([lines[cid] for cid in ids])
            self.journal.record(provider.name, provider.route, batch_id, ids)
            created[batch_id] = ids
            self.report(f"{provider.name}: submitted batch {batch_id} ({len(ids)} request(s))")
        return created

    def _collect(
        self, batch_id: str, status: BatchStatus | None, wanted: set[str], contents_known: bool
    ) -> _Ended:
        """What an ended batch gave for `wanted`. A request of `wanted` that its results do not
        name is to be submitted again, unless the batch's contents were unknown (then any of
        the run's waiting requests is wanted, and those it does not name simply wait)."""
        if status is None:
            ended = _Ended("unknown to the provider")
            if contents_known:
                reason = f"batch {batch_id} is no longer known to the provider"
                ended.again = dict.fromkeys(wanted, reason)
            return ended
        ended = _Ended(status.state)
        if status.problem is not None:
            reason = f"batch {batch_id} failed: {status.problem}"
            if contents_known:
                ended.lost = dict.fromkeys(wanted, reason)
            self.report(
                f"{self.provider.name}: {reason}; its {len(ended.lost)} request(s) have no "
                "answer (a re-run submits them again; with --batch-failed stop it reports them)"
            )
            return ended
        for cid, result in self.provider.results(batch_id):
            ended.held.append(cid)
            if cid not in wanted or cid in ended.answers:
                continue
            if result.response is not None:
                ended.answers[cid] = result.response
            elif result.retryable:
                ended.again[cid] = result.reason
            else:
                ended.lost[cid] = result.reason
        if contents_known:
            for cid in wanted - ended.answers.keys() - ended.again.keys() - ended.lost.keys():
                ended.again[cid] = f"batch {batch_id} ({status.state}) returned no result for it"
        return ended

    def _progress(
        self, latest: dict[str, BatchStatus], active: dict[str, list[str] | None], waited: float
    ) -> None:
        """One line: each unfinished batch's state and counts, and the time waited so far."""
        if not active:
            return
        parts = []
        for batch_id, ids in active.items():
            status = latest.get(batch_id)
            if status is None:  # submitted after this poll
                parts.append(f"{batch_id} submitted ({len(ids or ())} request(s))")
                continue
            counts = ", ".join(f"{k} {v}" for k, v in status.counts.items())
            parts.append(f"{batch_id} {status.state}" + (f" ({counts})" if counts else ""))
        self.status_line = f"{len(active)} batch(es) pending, waited {_duration(waited)}"
        self.report(f"{self.provider.name}: {'; '.join(parts)}; waited {_duration(waited)}")


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


__all__ = [
    "FAILED_CHOICES",
    "JOURNAL_FOLDER",
    "BatchJournal",
    "BatchLimits",
    "BatchProvider",
    "BatchRun",
    "BatchStatus",
    "ItemResult",
    "OnFailed",
    "custom_id",
    "split_batches",
]
