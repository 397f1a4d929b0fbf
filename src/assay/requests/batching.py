"""Length-sorted, parameter-grouped batches that carry each item's original index.

Sorting longest first makes padding small and surfaces out-of-memory on the first batch; grouping
by generation parameters lets a backend pass one parameter set per batch.

Batch shapes of requests sit with the requests, below the models: backends plan their own
batches with them (hf's memory planner), and so do the executors (ranks' shards) and run_evals.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Batch(Generic[T]):
    """Items of one batch and their positions in the caller's list."""

    indices: tuple[int, ...]
    items: tuple[T, ...]


def sorted_groups(
    items: Sequence[T],
    length: Callable[[T], int],
    group: Callable[[T], Hashable] | None = None,
) -> list[list[int]]:
    """Indices of `items` split by `group` key, each group sorted longest first.

    Ties keep their original order, so the plan is deterministic. Groups come in order of their
    first member.
    """
    keyed: dict[Hashable, list[int]] = {}
    for i, item in enumerate(items):
        keyed.setdefault(group(item) if group else None, []).append(i)
    lengths = [length(item) for item in items]
    return [sorted(members, key=lambda i: -lengths[i]) for members in keyed.values()]


def batches(
    items: Sequence[T],
    length: Callable[[T], int],
    batch_size: int | Callable[[int], int],
    group: Callable[[T], Hashable] | None = None,
) -> Iterator[Batch[T]]:
    """Yield length-sorted batches, never mixing groups.

    `batch_size` is a number, or a function of the longest length in the batch (for memory-aware
    sizing: long batches get fewer rows).
    """
    for members in sorted_groups(items, length, group):
        start = 0
        while start < len(members):
            size = batch_size(length(items[members[start]])) if callable(batch_size) else batch_size
            chunk = members[start : start + max(1, size)]
            yield Batch(tuple(chunk), tuple(items[i] for i in chunk))
            start += len(chunk)


def split_padding(lengths: Sequence[int], overhead: int) -> list[int]:
    """Sizes of consecutive sub-batches of a longest-first batch that minimise padded tokens.

    A padded batch costs its rows times its longest row; each extra sub-batch costs `overhead`
    token-equivalents (a pass's fixed cost). A batch whose lengths are close stays whole; a batch
    with a few long rows runs them apart from the short ones, which then pad to their own length.
    """
    n = len(lengths)
    best = [0] + [1 << 62] * n  # best[j]: cost of the first j rows
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(j):
            cost = best[i] + (j - i) * lengths[i] + overhead
            if cost < best[j]:
                best[j], cut[j] = cost, i
    sizes: list[int] = []
    j = n
    while j > 0:
        sizes.append(j - cut[j])
        j = cut[j]
    return sizes[::-1]


def shard(n_items: int, rank: int, world_size: int) -> range:
    """The contiguous slice of `n_items` that rank `rank` of `world_size` owns."""
    per, extra = divmod(n_items, world_size)
    start = rank * per + min(rank, extra)
    return range(start, start + per + (1 if rank < extra else 0))
