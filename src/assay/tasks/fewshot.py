"""Few-shot selection, computed for every doc up front and in doc order.

Because the whole assignment is made before any request runs, it never depends on batch size,
worker count or sharding. The "lm_eval" selector replays lm-eval's stream exactly: one
`random.Random(seed)` per task, consumed doc after doc, drawing n (or n + 1 and dropping the doc
itself when the pool is the eval split). Doc i's examples depend only on docs before it, so
`--limit` never changes them either.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from assay.errors import TaskConfigError


def _stable_rng(seed: int, task: str, doc_index: int) -> random.Random:
    digest = hashlib.sha256(f"{seed}\x1f{task}\x1f{doc_index}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _without(pool: Sequence[Any], row: Any, picks: Sequence[int]) -> list[int]:
    return [i for i in picks if pool[i] != row]


def select_fewshots(
    selector: str,
    pool: Sequence[dict[str, Any]],
    eval_rows: Sequence[dict[str, Any]] | Iterator[dict[str, Any]],
    n: int,
    *,
    seed: int,
    task: str,
    exclude_self: bool,
    sorting_class: Callable[[int], str] | None = None,
) -> Iterator[list[int]]:
    """Yield, for each eval row in order, the indices into `pool` of its few-shot examples.

    `exclude_self` says the pool is the eval split, so a row never appears among its own
    examples (lm-eval compares rows for equality; so does this).
    """
    needed = n + (1 if exclude_self else 0)
    if n > 0 and len(pool) < n:
        raise TaskConfigError(
            f"task {task!r}: {n} few-shot examples requested but the few-shot pool has only "
            f"{len(pool)} rows. Lower --num-fewshot or choose a larger few-shot split."
        )
    stream = random.Random(seed)
    for doc_index, row in enumerate(eval_rows):
        if n == 0:
            yield []
            continue
        if selector == "lm_eval":
            if exclude_self and row:
                picks = _without(pool, row, stream.sample(range(len(pool)), min(needed, len(pool))))
                picks = picks[:n]
                if len(picks) < n:
                    rest = [i for i in range(len(pool)) if pool[i] != row]
                    picks = stream.sample(rest, n)
            else:
                picks = stream.sample(range(len(pool)), n)
        elif selector in ("first_n", "sequential"):
            order = _without(pool, row, range(len(pool))) if exclude_self else range(len(pool))
            picks = list(order[:n]) if isinstance(order, list) else list(range(n))
        elif selector == "random":
            rng = _stable_rng(seed, task, doc_index)
            candidates = _without(pool, row, range(len(pool))) if exclude_self else range(len(pool))
            picks = rng.sample(candidates, min(n, len(candidates)))
        elif selector == "balanced":
            picks = _balanced(
                pool, row, n, _stable_rng(seed, task, doc_index), exclude_self, sorting_class
            )
        else:  # validated by TaskConfig.validate
            raise TaskConfigError(f"task {task!r}: unknown few-shot selector {selector!r}.")
        yield picks


def _balanced(
    pool: Sequence[dict[str, Any]],
    row: dict[str, Any],
    n: int,
    rng: random.Random,
    exclude_self: bool,
    sorting_class: Callable[[int], str] | None,
) -> list[int]:
    """Round-robin over classes (sorted by name), each class's members in seeded order."""
    by_class: dict[str, list[int]] = {}
    for i in range(len(pool)):
        if exclude_self and pool[i] == row:
            continue
        by_class.setdefault(sorting_class(i) if sorting_class else "", []).append(i)
    for members in by_class.values():
        rng.shuffle(members)
    queues = [by_class[k] for k in sorted(by_class)]
    picks: list[int] = []
    while len(picks) < n and any(queues):
        for queue in queues:
            if queue and len(picks) < n:
                picks.append(queue.pop())
    return picks
