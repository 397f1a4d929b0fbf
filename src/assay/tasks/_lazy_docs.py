"""process_docs applied only to the rows a run reads, when it is a chain of row-wise maps.

lm-eval runs a task's process_docs over a whole split before taking `--limit` docs: `--limit 1`
on HellaSwag maps all 10,042 rows first. Most process_docs functions are `dataset.map(fn)`, which
turns each row into one row independently of the others; for those, row `i` of the processed
split is `fn` of raw row `i`, and only the blocks of rows a run reads need mapping.

Whether a function is such a chain is learned without guessing: it is called once on a stand-in
split that records `.map(...)` calls and refuses everything else (length, filtering, shuffling,
batched maps, column access...). Only a function that returns the result of row-wise maps and
touched nothing else is mapped lazily; any other runs over the whole split, as before.

Blocks are mapped with datasets' own `map` over `select(range(...))` of the split, so every row
is produced by the same code as the full map. The first block has the full map's first writer
batch (1,000 rows), whose Arrow schema datasets infers; later blocks are cast to that schema, as
the full map casts its later batches.

Each mapped block is cached on disk beside the split, as datasets caches lm-eval's full map:
a later run of the same task (a restart, another model) reads the blocks it maps again instead
of calling process_docs on every row. Where the cache cannot be written, blocks are mapped in
memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from assay.errors import DataError

BLOCK = 1000
"""Rows mapped at a time: datasets' default writer batch, so the first block's schema is the
full map's."""

_ROWWISE_KWARGS = frozenset(
    {"desc", "load_from_cache_file", "remove_columns", "num_proc", "keep_in_memory", "batched"}
)
"""`map` arguments that keep it row-wise (`batched` only when false)."""

MapStep = tuple[Callable[..., Any], dict[str, Any]]


class _NotRowwise(Exception):
    """process_docs did something other than row-wise maps."""


class _MapProbe:
    """A stand-in split: records `.map(fn, ...)` calls, refuses every other use."""

    def __init__(self, steps: tuple[MapStep, ...] = ()) -> None:
        self.steps = steps

    def map(self, function: Any = None, *args: Any, **kwargs: Any) -> _MapProbe:
        if args or not callable(function) or not set(kwargs) <= _ROWWISE_KWARGS:
            raise _NotRowwise
        if kwargs.get("batched"):
            raise _NotRowwise
        kept = {k: v for k, v in kwargs.items() if k in ("remove_columns",)}
        return _MapProbe((*self.steps, (function, kept)))

    def __getattr__(self, name: str) -> Any:
        raise _NotRowwise(name)


def rowwise_maps(process_docs: Callable[[Any], Any]) -> list[MapStep] | None:
    """The row-wise `map` steps `process_docs` consists of, or None if it does anything else."""
    try:
        out = process_docs(_MapProbe())
    except Exception:  # anything the stand-in refused, or user code failing on it
        return None
    if not isinstance(out, _MapProbe) or not out.steps:
        return None
    return list(out.steps)


class LazyMapped(Sequence[dict[str, Any]]):
    """A split after row-wise process_docs maps, mapped a block at a time as rows are read.

    Read in order, one block is held at a time, so memory stays flat; with `keep` every mapped
    block stays (for rows read in any order, such as a few-shot pool's). `where` names the task
    and split in errors.
    """

    def __init__(self, rows: Any, steps: list[MapStep], where: str, keep: bool = False) -> None:
        self.rows = rows
        self.steps = steps
        self.where = where
        self.keep = keep
        self._start = -1
        self._block: list[dict[str, Any]] = []
        self._kept: dict[int, list[dict[str, Any]]] = {}
        self._features: list[Any] | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self.rows):
            raise IndexError(i)
        start = i - i % BLOCK
        if start != self._start:
            if self._features is None and start != 0:
                self._map(0)  # the schema every later block is cast to
            self._block = self._kept.get(start) or self._map(start)
            self._start = start
        return self._block[i - start]

    def _map(self, start: int) -> list[dict[str, Any]]:
        part = self.rows.select(range(start, min(start + BLOCK, len(self.rows))))
        features = []
        try:
            for step, (function, kwargs) in enumerate(self.steps):
                cast = {} if self._features is None else {"features": self._features[step]}
                part = _map(part, function, {**kwargs, **cast})
                features.append(part.features)
        except Exception as exc:  # user code: report it with the task and split
            raise DataError(
                f"{self.where}: process_docs failed: {type(exc).__name__}: {exc}"
            ) from None
        if self._features is None:
            self._features = features
        block = part.to_list()
        if self.keep:
            self._kept[start] = block
        return block


def _map(part: Any, function: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """`part.map(function)` cached on disk by datasets' fingerprint, else kept in memory."""
    try:
        return part.map(function, **kwargs)
    except OSError:  # a read-only or full cache folder: datasets' map needs no file to run
        return part.map(function, keep_in_memory=True, **kwargs)


def processed(
    rows: Any, process_docs: Callable[[Any], Any], where: str, keep: bool = False
) -> LazyMapped | None:
    """`rows` after `process_docs`, mapped lazily when that is exact; None when it is not."""
    if not hasattr(rows, "select") or not hasattr(rows, "map"):
        return None  # not a datasets split: its own code runs as written
    steps = rowwise_maps(process_docs)
    return LazyMapped(rows, steps, where, keep) if steps is not None else None
