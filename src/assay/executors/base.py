"""What every executor shares: the Executor protocol and the work plan it runs.

A run's requests become one plan whatever executes it: identical requests are computed once,
the response cache serves what it holds, and the rest is cut into chunks of about `chunk_size`
requests of one kind, longest first. Loglikelihood requests sharing a context are never split
across chunks (a chunk grows past its size rather than split one question's choices), so a
backend that shares prefixes sees every choice of a question together. The chunk is the unit
of work and of cache commits: a backend receives exactly the same chunks
from the local executor as from any number of Ray replicas, so results never depend on where
or in which order chunks ran.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from assay.cache import ResponseCache, request_key
from assay.errors import ModelError
from assay.models.base import LM
from assay.requests import (
    LoglikelihoodRequest,
    Request,
    RequestKind,
    Result,
    RollingRequest,
    kind_of,
)

DEFAULT_CHUNK_SIZE = 512
"""Requests per unit of work (and per cache commit)."""

Progress = Callable[[int], None]
"""Called with the number of requests just completed (cached ones included)."""


@runtime_checkable
class Executor(Protocol):
    """Computes a run's requests with one model, here or on many workers.

    `model` is the backend as the driver sees it: its identity keys the cache, and its optional
    members (apply_chat_template, count_tokens, max_length, accepts_messages) shape prompts.
    `primary` is False in the processes of a data-parallel launch that must not write results.
    """

    model: LM
    primary: bool

    def run(
        self,
        requests: Sequence[Request],
        *,
        cache: ResponseCache | None = None,
        progress: Progress | None = None,
    ) -> list[Result]:
        """Results of `requests` (any mix of kinds), in order, computing each distinct one once."""
        ...

    def describe(self) -> dict[str, Any]:
        """How the work ran (executor name, replicas...), recorded in results.json."""
        ...

    def close(self) -> None:
        """Release workers (idempotent)."""
        ...


@dataclass(frozen=True)
class Chunk:
    """Distinct requests of one kind, computed together by one backend call."""

    kind: RequestKind
    keys: tuple[str, ...]
    requests: tuple[Request, ...]


@dataclass
class WorkPlan:
    """The chunks left to compute for a list of requests, and the results gathered so far."""

    keys: list[str]
    done: dict[str, Result]
    chunks: list[Chunk]
    cached: int
    """Caller requests (duplicates counted) answered by the cache."""
    _uses: dict[str, int] = field(default_factory=dict)

    def complete(self, chunk: Chunk, results: Sequence[Result], cache: ResponseCache | None) -> int:
        """Record a computed chunk (committing it to the cache); the caller requests it answers."""
        if len(results) != len(chunk.keys):
            raise ModelError(
                f"the model returned {len(results)} results for {len(chunk.keys)} "
                f"{chunk.kind.value} requests."
            )
        fresh = list(zip(chunk.keys, results, strict=True))
        if cache is not None:
            cache.put_many(fresh)
        self.done.update(fresh)
        return sum(self._uses[k] for k in chunk.keys)

    def results(self) -> list[Result]:
        """One result per caller request, in the caller's order (after every chunk completed)."""
        return [self.done[k] for k in self.keys]


def _length(request: Request) -> int:
    if isinstance(request, LoglikelihoodRequest):
        return len(request.context) + len(request.continuation)
    if isinstance(request, RollingRequest):
        return len(request.text)
    return len(request.prompt if isinstance(request.prompt, str) else str(request.prompt))


def _groups(pending: list[str], unique: dict[str, Request]) -> list[list[str]]:
    """Pending keys in groups that must share a backend call, longest group first."""
    groups: dict[str, list[str]] = {}
    for key in pending:
        request = unique[key]
        context = request.context if isinstance(request, LoglikelihoodRequest) else key
        groups.setdefault(context, []).append(key)
    for members in groups.values():
        members.sort(key=lambda k: -_length(unique[k]))
    return sorted(groups.values(), key=lambda g: -_length(unique[g[0]]))


def _pack(groups: list[list[str]], size: int) -> list[list[str]]:
    """Consecutive groups packed into chunks of about `size` keys; a group is never split."""
    chunks: list[list[str]] = []
    current: list[str] = []
    for group in groups:
        if current and len(current) + len(group) > size:
            chunks.append(current)
            current = []
        current.extend(group)
    if current:
        chunks.append(current)
    return chunks


def commit_chunk(model: LM) -> int:
    """Requests per chunk for `model`: its fixed whole-number batch size, else DEFAULT_CHUNK_SIZE.

    A backend with a fixed batch size is committed batch by batch, so a kill loses at most the
    batch in flight.
    """
    size = getattr(model, "batch_size", None)
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        return size
    return DEFAULT_CHUNK_SIZE


def plan_requests(
    requests: Sequence[Request],
    cache: ResponseCache | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> WorkPlan:
    """Deduplicate `requests`, look them up in `cache`, and chunk what is left."""
    keys = [request_key(r) for r in requests]
    unique: dict[str, Request] = {}
    for key, request in zip(keys, requests, strict=True):
        unique.setdefault(key, request)
    done: dict[str, Result] = cache.get_many(list(unique)) if cache is not None else {}
    uses: dict[str, int] = {}
    for key in keys:
        uses[key] = uses.get(key, 0) + 1
    by_kind: dict[RequestKind, list[str]] = {}
    for key, request in unique.items():
        if key not in done:
            by_kind.setdefault(kind_of(request), []).append(key)
    chunks = [
        Chunk(kind, tuple(part), tuple(unique[k] for k in part))
        for kind, pending in by_kind.items()
        for part in _pack(_groups(pending, unique), chunk_size)
    ]
    cached = sum(n for k, n in uses.items() if k in done)
    return WorkPlan(keys, done, chunks, cached, uses)


def compute_chunk(model: LM, kind: RequestKind, requests: Sequence[Request]) -> list[Result]:
    """Run one chunk through the backend method of its kind."""
    if kind == RequestKind.LOGLIKELIHOOD:
        return list(model.loglikelihood(requests))  # type: ignore[arg-type]
    if kind == RequestKind.LOGLIKELIHOOD_ROLLING:
        return list(model.loglikelihood_rolling(requests))  # type: ignore[arg-type]
    return list(model.generate_until(requests))  # type: ignore[arg-type]


__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "Chunk",
    "Executor",
    "Progress",
    "WorkPlan",
    "commit_chunk",
    "compute_chunk",
    "plan_requests",
]
