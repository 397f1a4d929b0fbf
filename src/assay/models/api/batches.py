"""Provider batch APIs: many requests sent as one job, answered within a day at half the price.

`BatchRun.run` turns request bodies into provider batches and follows them to the end:

- requests are split to the provider's per-batch limits (`BatchLimits`: requests and bytes);
- every batch id is written to a journal (`BatchJournal`, one small JSON file per batch in
  each of its folders) as soon as the provider returns it, so a run that stops (an exit, a
  crash, `kill -9`) polls the same batches when it is run again instead of paying twice;
- each request's custom id is a digest of where it goes and its exact body, so a re-run finds
  its requests in the journal whatever order it builds them in;
- answers are handed over (`deliver`) as each batch's results download;
- items that expired, were cancelled, went missing or failed for a transient reason (429,
  5xx) are submitted again, at most `resubmits` more times; the rest are reported per request.

The engine knows nothing of HTTP: a `BatchProvider` (see `batch_providers`) does the talking,
so the bookkeeping is tested against fakes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

JOURNAL_FOLDER = "batches"
"""Name of the journal folder beside a run's results and beside its response cache."""


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


def custom_id(route: str, body: Mapping[str, Any]) -> str:
    """The id of a request: 64 hex digits of its route and exact body (Anthropic's limit)."""
    text = json.dumps([route, body], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class BatchJournal:
    """Submitted batches and the custom ids they hold, in one or more folders.

    Each batch is one JSON file written atomically (a temporary file renamed into place), so a
    kill leaves either the whole record or none. Every folder receives every record; reading
    takes the union, so a re-run that shares either the output folder or the response cache
    finds them.
    """

    def __init__(self, folders: Sequence[Path]) -> None:
        self.folders = list(dict.fromkeys(Path(f) for f in folders))

    def record(self, provider: str, route: str, batch_id: str, ids: Sequence[str]) -> None:
        """Write that batch `batch_id` holds `ids` (before anything else happens to it)."""
        entry = {
            "provider": provider,
            "route": route,
            "batch_id": batch_id,
            "created": time.time(),
            "custom_ids": list(ids),
        }
        text = json.dumps(entry)
        name = _safe_name(batch_id) + ".json"
        for folder in self.folders:
            folder.mkdir(parents=True, exist_ok=True)
            temporary = folder / f".{name}.{os.getpid()}.tmp"
            temporary.write_text(text, encoding="utf-8")
            os.replace(temporary, folder / name)

    def find(self, route: str, ids: set[str]) -> dict[str, str]:
        """For each of `ids` already submitted to `route`, the latest batch holding it."""
        entries: dict[str, dict[str, Any]] = {}
        for folder in self.folders:
            for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
                try:
                    entry = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    log.warning("batch journal %s is unreadable; ignoring it", path)
                    continue
                if isinstance(entry, dict) and entry.get("route") == route:
                    entries[str(entry.get("batch_id"))] = entry
        found: dict[str, str] = {}
        for entry in sorted(entries.values(), key=lambda e: float(e.get("created") or 0)):
            for cid in entry.get("custom_ids") or []:
                if cid in ids:
                    found[cid] = str(entry["batch_id"])
        return found


def _safe_name(batch_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in batch_id)


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
class BatchRun:
    """Sends request bodies through a provider's batch API and waits for their answers."""

    provider: BatchProvider
    journal: BatchJournal
    poll_interval: float = 30.0
    """Seconds between two looks at the unfinished batches."""
    resubmits: int = 2
    """Further submissions of a request whose answer expired, was cancelled or failed
    transiently; 0 never submits twice."""
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
        followed = self.journal.find(provider.route, set(owners))
        active: dict[str, list[str]] = {}
        for cid, batch_id in followed.items():
            active.setdefault(batch_id, []).append(cid)
        if active:
            self.report(
                f"{provider.name}: following {len(active)} batch(es) submitted earlier "
                f"({len(followed)} request(s)); nothing is sent twice"
            )
        submissions = dict.fromkeys(followed, 1)
        queue = [cid for cid in owners if cid not in followed]
        failed: dict[str, str] = {}
        started = self.clock()
        while queue or active:
            if queue:
                active.update(self._submit(queue, lines))
                for cid in queue:
                    submissions[cid] = submissions.get(cid, 0) + 1
                queue = []
            waited = self.clock() - started
            latest: dict[str, BatchStatus] = {}
            for batch_id in list(active):
                status = provider.status(batch_id)
                if status is not None and not status.ended:
                    latest[batch_id] = status
                    continue
                ids = active.pop(batch_id)
                answers, again = self._collect(batch_id, status, ids, failed)
                deliver({j: answer for cid, answer in answers.items() for j in owners[cid]})
                for cid, reason in again.items():
                    if submissions[cid] <= self.resubmits:
                        queue.append(cid)
                    else:
                        times = submissions[cid]
                        failed[cid] = f"{reason} (submitted {times} time{'s' * (times > 1)})"
            self._progress(latest, active, waited)
            if active and not queue:
                self.sleep(self.poll_interval)
        return {j: reason for cid, reason in failed.items() for j in owners[cid]}

    def _submit(self, queue: list[str], lines: dict[str, bytes]) -> dict[str, list[str]]:
        """Submit the queued requests in batches within the limits; batch id to its ids."""
        provider = self.provider
        created: dict[str, list[str]] = {}
        for part in split_batches([lines[cid] for cid in queue], provider.limits):
            ids = [queue[i] for i in part]
            batch_id = provider.submit([lines[cid] for cid in ids])
            self.journal.record(provider.name, provider.route, batch_id, ids)
            created[batch_id] = ids
            self.report(f"{provider.name}: submitted batch {batch_id} ({len(ids)} request(s))")
        return created

    def _collect(
        self, batch_id: str, status: BatchStatus | None, ids: list[str], failed: dict[str, str]
    ) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
        """The answers of an ended batch, and its requests worth submitting again (with why);
        requests that failed for good go into `failed`."""
        wanted = set(ids)
        if status is None:
            reason = f"batch {batch_id} is no longer known to the provider"
            return {}, dict.fromkeys(ids, reason)
        if status.problem is not None:
            failed.update(dict.fromkeys(ids, f"batch {batch_id} was rejected: {status.problem}"))
            return {}, {}
        answers: dict[str, dict[str, Any]] = {}
        again: dict[str, str] = {}
        for cid, result in self.provider.results(batch_id):
            if cid not in wanted or cid in answers:
                continue
            if result.response is not None:
                answers[cid] = result.response
            elif result.retryable:
                again[cid] = result.reason
            else:
                failed[cid] = result.reason
        for cid in wanted - answers.keys() - again.keys() - failed.keys():
            again[cid] = f"batch {batch_id} ({status.state}) returned no result for it"
        return answers, again

    def _progress(
        self, latest: dict[str, BatchStatus], active: dict[str, list[str]], waited: float
    ) -> None:
        """One line: each unfinished batch's state and counts, and the time waited so far."""
        if not active:
            return
        parts = []
        for batch_id in active:
            status = latest.get(batch_id)
            if status is None:  # submitted after this poll
                parts.append(f"{batch_id} submitted ({len(active[batch_id])} request(s))")
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
    "JOURNAL_FOLDER",
    "BatchJournal",
    "BatchLimits",
    "BatchProvider",
    "BatchRun",
    "BatchStatus",
    "ItemResult",
    "custom_id",
    "split_batches",
]
