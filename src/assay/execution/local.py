"""The local executor: runs a run's work plan in this process, one chunk after the other.

Each chunk is committed to the response cache as it completes, and a backend whose answers
arrive one by one (an API) files them as they arrive (`requests.cache.receiving`), so an
interrupted run resumes where it stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from assay.errors import ModelError
from assay.execution.executor import (
    Progress,
    commit_chunk,
    compute_chunk,
    plan_requests,
    token_measure,
)
from assay.execution.stats import Answers
from assay.models.base import LM
from assay.requests.cache import ResponseCache, receiving
from assay.requests.types import Request

log = logging.getLogger(__name__)


def run_requests(
    model: LM,
    requests: Sequence[Request],
    *,
    cache: ResponseCache | None = None,
    chunk_size: int | None = None,
    progress: Progress | None = None,
) -> Answers:
    """Results of `requests` (any mix of kinds), in order, computing each distinct one once,
    with the statistics of the call.

    `chunk_size` defaults to `commit_chunk(model)`.
    """
    chosen = len(model.batch_sizes)
    plan = plan_requests(
        requests, cache, chunk_size or commit_chunk(model), measure=token_measure(model)
    )
    distinct = len(set(plan.keys))
    log.info(
        "%d requests (%d distinct): %d from the cache, %d to compute",
        len(plan.keys),
        distinct,
        len(plan.done),
        distinct - len(plan.done),
    )
    if progress and plan.cached:
        progress(plan.cached)
    for chunk in plan.chunks:
        try:
            with receiving(cache):
                results = compute_chunk(model, chunk.kind, chunk.requests)
        except ModelError as exc:
            raise plan.failed(chunk, exc, cache) from None
        answered = plan.complete(chunk, results, cache)
        if progress:
            progress(answered)
    return plan.answers(model.batch_sizes[chosen:])


class LocalExecutor:
    """Runs every chunk in this process, one after the other."""

    name = "local"
    primary = True

    def __init__(self, model: LM) -> None:
        self.model = model

    def run(
        self,
        requests: Sequence[Request],
        *,
        cache: ResponseCache | None = None,
        progress: Progress | None = None,
    ) -> Answers:
        return run_requests(self.model, requests, cache=cache, progress=progress)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def close(self) -> None:
        """Nothing to release: the model belongs to the caller."""


__all__ = ["LocalExecutor", "run_requests"]
