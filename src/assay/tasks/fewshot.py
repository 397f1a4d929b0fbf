"""Few-shot selection, computed for every doc up front and in doc order.

Because the whole assignment is made before any request runs, it never depends on batch size,
worker count or sharding. The "lm_eval" selector replays lm-eval's stream exactly: one
`random.Random(seed)` per task, consumed doc after doc, drawing n (or, when lm-eval passes the
eval doc to its sampler, n + 1 and dropping rows equal to the doc). Doc i's examples depend only
on docs before it, so `--limit` never changes them either.

A doc is never among its own examples. Where lm-eval would show a doc its own row (the pool is
the evaluated split but lm-eval does not pass the doc to its sampler), that example is replaced
from a per-doc generator, so the shared stream, and every other doc's examples, stay as lm-eval's.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from assay import peers
from assay.errors import TaskConfigError

if TYPE_CHECKING:
    from assay.doc import Doc
    from assay.tasks.task import Task

SELECTORS = ("lm_eval", "first_n", "sequential", "random", "balanced")
"""assay's own few-shot selectors (`TaskConfig.few_shots_select`)."""


def _stable_rng(seed: int | None, task: str, doc_index: int) -> random.Random:
    digest = hashlib.sha256(f"{seed}\x1f{task}\x1f{doc_index}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _without(pool: Sequence[Any], row: Any, picks: Iterable[int]) -> list[int]:
    return [i for i in picks if pool[i] != row]


def _first_without(pool: Sequence[Any], row: Any, n: int) -> list[int]:
    """The first n pool indices whose row differs from `row` (scans only as far as needed)."""
    picks: list[int] = []
    for i in range(len(pool)):
        if len(picks) == n:
            break
        if pool[i] != row:
            picks.append(i)
    return picks


def _sample_without(pool: Sequence[Any], row: Any, n: int, rng: random.Random) -> list[int]:
    """n random pool indices whose rows differ from `row`."""
    picks = _without(pool, row, rng.sample(range(len(pool)), min(n + 1, len(pool))))[:n]
    if len(picks) < n:  # several copies of the row in the pool
        picks = rng.sample(_without(pool, row, range(len(pool))), n)
    return picks


def _replace_self(
    pool: Sequence[Any], row: Any, picks: list[int], rng: random.Random, task: str
) -> list[int]:
    """Swap picks equal to `row` for other rows, keeping the other picks and their order."""
    bad = [k for k, i in enumerate(picks) if pool[i] == row]
    if not bad:
        return picks
    chosen = set(picks)
    spares = [i for i in range(len(pool)) if i not in chosen and pool[i] != row]
    if len(spares) < len(bad):
        raise TaskConfigError(
            f"task {task!r}: the few-shot pool has too few rows that differ from the evaluated "
            "doc. Lower --num-fewshot or choose a larger few-shot split."
        )
    out = list(picks)
    for k, j in zip(bad, rng.sample(spares, len(bad)), strict=True):
        out[k] = j
    return out


def select_fewshots(
    selector: str,
    pool: Sequence[dict[str, Any]],
    eval_rows: Iterable[dict[str, Any]],
    n: int,
    *,
    seed: int | None,
    task: str,
    exclude_self: bool,
    drop_equal: bool | None = None,
    sorting_class: Callable[[int], str] | None = None,
    replaced: list[int] | None = None,
) -> Iterator[list[int]]:
    """Yield, for each eval row in order, the indices into `pool` of its few-shot examples.

    `seed` None draws unseeded, as lm-eval's `random.Random(None)` (--seed ...,None).

    `exclude_self` says the pool is an evaluated split, so rows equal to the doc are never
    picked (lm-eval compares rows for equality; so does this). `drop_equal` is lm-eval's own
    rule, which decides how its stream is consumed: draw n + 1 and drop rows equal to the doc
    (lm-eval does this when the few-shot split is the test split); None means `exclude_self`.
    `replaced` collects the eval rows whose own row lm-eval's draw picked and this replaced
    (their prompts differ from lm-eval's).
    """
    if drop_equal is None:
        drop_equal = exclude_self
    if n > 0 and len(pool) < n:
        raise TaskConfigError(
            f"task {task!r}: {n} few-shot examples requested but the few-shot pool has only "
            f"{len(pool)} rows. Lower --num-fewshot or choose a larger few-shot split."
        )
    stream = random.Random(seed)
    classes = _classes(pool, sorting_class) if selector == "balanced" and n > 0 else {}
    for doc_index, row in enumerate(eval_rows):
        if n == 0:
            yield []
            continue
        if selector == "lm_eval":
            # lm-eval skips the removal for an empty (falsy) doc; so does this.
            if drop_equal and row:
                picks = _sample_without(pool, row, n, stream)
            else:
                drawn = stream.sample(range(len(pool)), n)
                picks = drawn
                if exclude_self:
                    picks = _replace_self(
                        pool, row, drawn, _stable_rng(seed, task, doc_index), task
                    )
                    if picks != drawn and replaced is not None:
                        replaced.append(doc_index)
        elif selector in ("first_n", "sequential"):
            picks = _first_without(pool, row, n) if exclude_self or drop_equal else list(range(n))
            if not drop_equal and picks != list(range(n)) and replaced is not None:
                replaced.append(doc_index)
        elif selector == "random":
            rng = _stable_rng(seed, task, doc_index)
            picks = (
                _sample_without(pool, row, n, rng)
                if exclude_self
                else rng.sample(range(len(pool)), n)
            )
        elif selector == "balanced":
            picks = _balanced(
                pool, row, n, _stable_rng(seed, task, doc_index), exclude_self, classes
            )
        else:  # validated by TaskConfig.validate
            raise TaskConfigError(f"task {task!r}: unknown few-shot selector {selector!r}.")
        if len(picks) < n:
            raise TaskConfigError(
                f"task {task!r}: {n} few-shot examples requested but only {len(picks)} pool rows "
                "differ from the evaluated doc. Lower --num-fewshot or choose a larger split."
            )
        yield picks


def _classes(
    pool: Sequence[dict[str, Any]], sorting_class: Callable[[int], str] | None
) -> dict[str, list[int]]:
    """Pool indices by class label, labels sorted."""
    by_class: dict[str, list[int]] = {}
    for i in range(len(pool)):
        by_class.setdefault(sorting_class(i) if sorting_class else "", []).append(i)
    return dict(sorted(by_class.items()))


def _balanced(
    pool: Sequence[dict[str, Any]],
    row: dict[str, Any],
    n: int,
    rng: random.Random,
    exclude_self: bool,
    classes: dict[str, list[int]],
) -> list[int]:
    """Round-robin over classes (sorted by name), each class's members in seeded order."""
    queues = []
    for members in classes.values():
        # No class gives more than n examples; one spare covers the doc's own row.
        drawn = rng.sample(members, min(n + 1, len(members)))
        if exclude_self:
            drawn = _without(pool, row, drawn)
        queues.append(drawn[::-1])
    picks: list[int] = []
    while len(picks) < n and any(queues):
        for queue in queues:
            if queue and len(picks) < n:
                picks.append(queue.pop())
    return picks


class PeerSelection(Protocol):
    """Another harness's few-shot selections: a module named in `peers.FEWSHOT_SELECTORS`,
    serving the selectors `<prefix>:<name>`."""

    SELECTORS: tuple[str, ...]
    """Its selectors' full names."""

    def plan(
        self,
        task: Task,
        selector: str,
        shots: int,
        rows: Sequence[dict[str, Any]],
        cache: dict[int, Doc],
    ) -> list[list[int]]:
        """Per eval row, the positions in the few-shot pool of its examples (the pool docs it
        builds go into `cache`)."""
        ...


def peer_selection(selector: str) -> PeerSelection | None:
    """The module serving `selector` (`<prefix>:<name>`); None for assay's own selectors."""
    prefix, sep, _ = selector.partition(":")
    module = peers.FEWSHOT_SELECTORS.get(prefix) if sep else None
    if module is None:
        return None
    [found] = peers.load((module,))
    selection: PeerSelection = found  # a module implements the Protocol with its names
    return selection


def fewshot_selectors() -> tuple[str, ...]:
    """Every selector a task may name: assay's own, then other harnesses'."""
    out = list(SELECTORS)
    for module in peers.load(tuple(peers.FEWSHOT_SELECTORS.values())):
        out += module.SELECTORS
    return tuple(out)
