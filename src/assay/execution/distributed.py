"""Data parallel over the processes of `accelerate launch` or `torchrun` (one model per rank).

Every rank runs the same pipeline, so tasks, docs and prompts are the same everywhere. Rank 0
alone reads the response cache and tells the others what it found, so every rank holds the same
work plan. Chunks are dealt in rounds, one per rank (`assay.requests.batching.shard` of the round), and
after each round every rank receives every result: all ranks score alike, and rank 0 commits
the round to the cache and alone writes results and samples files. Answers that arrive one by
one (an API's) enter the cache as they arrive meanwhile: rank 0's, and on a single machine
every rank's (`DataParallelExecutor._landing`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from assay.errors import ConfigError
from assay.execution.executor import (
    Progress,
    commit_chunk,
    compute_chunk,
    plan_requests,
    token_measure,
)
from assay.execution.stats import Answers
from assay.models.base import LM
from assay.requests.batching import shard
from assay.requests.cache import ResponseCache, receiving
from assay.requests.types import Request, Result


@dataclass(frozen=True)
class LaunchRank:
    """This process's place in a multi-process launch."""

    rank: int
    world_size: int
    local_rank: int


def launch_rank() -> LaunchRank | None:
    """The rank set by accelerate/torchrun (RANK, WORLD_SIZE, LOCAL_RANK), or None alone."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return None
    rank = int(os.environ.get("RANK", "0"))
    return LaunchRank(rank, world_size, int(os.environ.get("LOCAL_RANK", str(rank))))


class _Found:
    """Rank 0's cache hits, answering plan_requests on the other ranks."""

    def __init__(self, found: dict[str, Result]) -> None:
        self.found = found

    def get_many(self, keys: Sequence[str]) -> dict[str, Result]:
        return {k: self.found[k] for k in keys if k in self.found}


class DataParallelExecutor:
    """Splits every run's chunks over the ranks of a torch.distributed process group.

    The group is joined with the gloo backend (results travel as pickled objects, on CPU or GPU
    machines alike) from the launcher's MASTER_ADDR/MASTER_PORT.
    """

    name = "data-parallel"

    def __init__(self, model: LM, launch: LaunchRank) -> None:
        try:
            import torch.distributed as dist

            self._owns_group = not dist.is_initialized()
            if self._owns_group:
                dist.init_process_group("gloo", rank=launch.rank, world_size=launch.world_size)
        except (ImportError, ValueError, RuntimeError) as exc:
            raise ConfigError(
                f"WORLD_SIZE={launch.world_size} asks for a data-parallel run, but its process "
                f"group cannot start ({type(exc).__name__}: {exc}). Start assay with "
                "`accelerate launch -m assay run ...` or `torchrun -m assay run ...` (torch "
                "installed: pip install 'assay[hf]'), or unset WORLD_SIZE."
            ) from None
        self._dist = dist
        self.model = model
        self.rank, self.world_size = launch.rank, launch.world_size
        self.primary = launch.rank == 0
        self.chunks_done = [0] * launch.world_size
        """Chunks each rank computed."""
        self._cache: ResponseCache | None = None
        """Rank 0's response cache as this rank files arriving answers in it (`_landing`)."""

    def run(
        self,
        requests: Sequence[Request],
        *,
        cache: ResponseCache | None = None,
        progress: Progress | None = None,
    ) -> Answers:
        """Results of `requests` on every rank, each rank computing its share of the chunks."""
        size, measure = commit_chunk(self.model), token_measure(self.model)
        chosen = len(self.model.batch_sizes)
        landing = cache if self.primary else self._landing(cache)
        cache = cache if self.primary else None
        found: list[Any] = [None]
        if self.primary:
            plan = plan_requests(requests, cache, size, measure=measure)
            found[0] = plan.done
        self._dist.broadcast_object_list(found, src=0)
        if not self.primary:
            plan = plan_requests(requests, _Found(found[0]), size, measure=measure)  # type: ignore[arg-type]
        if progress and plan.cached:
            progress(plan.cached)
        for start in range(0, len(plan.chunks), self.world_size):
            round_ = plan.chunks[start : start + self.world_size]
            with receiving(landing):
                mine = {
                    i: compute_chunk(self.model, round_[i].kind, round_[i].requests)
                    for i in shard(len(round_), self.rank, self.world_size)
                }
            gathered: list[Any] = [None] * self.world_size
            self._dist.all_gather_object(gathered, mine)
            for rank, part in enumerate(gathered):
                self.chunks_done[rank] += len(part)
                for i, results in part.items():
                    answered = plan.complete(round_[i], results, cache)
                    if progress:
                        progress(answered)
        return plan.answers(self.model.batch_sizes[chosen:])

    def _landing(self, cache: ResponseCache | None) -> ResponseCache | None:
        """Where this rank (not rank 0) files answers that arrive one by one (an API's): rank
        0's cache file, opened once, when every rank runs on one machine (LOCAL_WORLD_SIZE
        equals WORLD_SIZE), so that SQLite's locking holds; elsewhere they wait for the round."""
        if cache is None or os.environ.get("LOCAL_WORLD_SIZE") != str(self.world_size):
            return None
        if self._cache is None:
            self._cache = ResponseCache(cache.path, self.model.identity())
        return self._cache

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "world_size": self.world_size,
            "chunks_per_rank": list(self.chunks_done),
        }

    def close(self) -> None:
        """Leave the process group this executor started (one a caller started is theirs).

        Every collective is over by now, so leaving needs no barrier; a group left to the
        interpreter's exit can abort the process ("terminate called without an active
        exception") while gloo's threads are torn down."""
        if self._cache is not None:
            self._cache.close()
        if self._owns_group and self._dist.is_initialized():
            self._dist.destroy_process_group()


__all__ = ["DataParallelExecutor", "LaunchRank", "launch_rank"]
