"""The local executor: deduplicates requests, serves what the cache has, runs the rest in chunks.

Chunks are committed to the cache as they complete, so an interrupted run resumes where it
stopped. A backend with a whole-number `batch_size` attribute gets chunks of exactly that size,
so a kill loses at most the batch in flight; other backends get chunks of DEFAULT_CHUNK requests.
Requests are ordered longest first (and contexts kept together) before chunking, so a backend
sees similar lengths, and choices sharing a context arrive in the same chunk.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

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

log = logging.getLogger(__name__)

DEFAULT_CHUNK = 512
"""Requests per backend call (and cache commit) when the backend has no fixed batch size."""

Progress = Callable[[int], None]
"""Called with the number of requests just completed (cached ones included)."""


def _order_key(request: Request) -> tuple[Any, ...]:
    if isinstance(request, LoglikelihoodRequest):
        return (-len(request.context) - len(request.continuation), request.context)
    if isinstance(request, RollingRequest):
        return (-len(request.text),)
    prompt = request.prompt if isinstance(request.prompt, str) else str(request.prompt)
    return (-len(prompt),)


def commit_chunk(model: LM) -> int:
    """Requests per backend call: the backend's fixed batch size, else DEFAULT_CHUNK."""
    size = getattr(model, "batch_size", None)
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        return size
    return DEFAULT_CHUNK


def run_requests(
    model: LM,
    requests: Sequence[Request],
    *,
    cache: ResponseCache | None = None,
    chunk_size: int | None = None,
    progress: Progress | None = None,
) -> list[Result]:
    """Results of `requests` (any mix of kinds), in order, computing each distinct one once.

    `chunk_size` defaults to `commit_chunk(model)`.
    """
    chunk_size = chunk_size or commit_chunk(model)
    keys = [request_key(r) for r in requests]
    unique: dict[str, Request] = {}
    for key, request in zip(keys, requests, strict=True):
        unique.setdefault(key, request)
    done: dict[str, Result] = cache.get_many(list(unique)) if cache is not None else {}
    if progress and done:
        progress(sum(1 for k in keys if k in done))
    by_kind: dict[RequestKind, list[str]] = {}
    for key, request in unique.items():
        if key not in done:
            by_kind.setdefault(kind_of(request), []).append(key)
    remaining_counts: dict[str, int] = {}
    for key in keys:
        if key not in done:
            remaining_counts[key] = remaining_counts.get(key, 0) + 1
    log.info(
        "%d requests (%d distinct): %d from the cache, %d to compute",
        len(keys),
        len(unique),
        len(done),
        len(unique) - len(done),
    )
    for kind, pending in by_kind.items():
        pending.sort(key=lambda k: _order_key(unique[k]))
        method = _method(model, kind)
        for start in range(0, len(pending), chunk_size):
            chunk = pending[start : start + chunk_size]
            results = method([unique[k] for k in chunk])
            if len(results) != len(chunk):
                raise ModelError(
                    f"the model returned {len(results)} results for {len(chunk)} {kind.value} requests."
                )
            fresh = list(zip(chunk, results, strict=True))
            if cache is not None:
                cache.put_many(fresh)
            done.update(fresh)
            if progress:
                progress(sum(remaining_counts[k] for k in chunk))
    return [done[k] for k in keys]


def _method(model: LM, kind: RequestKind) -> Callable[[list[Any]], list[Result]]:
    if kind == RequestKind.LOGLIKELIHOOD:
        return model.loglikelihood  # type: ignore[return-value]
    if kind == RequestKind.LOGLIKELIHOOD_ROLLING:
        return model.loglikelihood_rolling  # type: ignore[return-value]
    return model.generate_until  # type: ignore[return-value]


__all__ = ["DEFAULT_CHUNK", "commit_chunk", "run_requests"]
