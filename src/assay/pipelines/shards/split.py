"""Datasets of eval pipelines as rows, and their seeded shuffle into shards.

Shards are drawn by shuffling row positions with the run seed and cutting the permutation into
`num_shards` near-equal parts, so every shard is a simple random sample of the dataset and the
estimates after each shard are unbiased even when the dataset is ordered (by topic, difficulty or
source). The permutation is recorded with the experiment.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from typing import Any

from assay.errors import DataError
from assay.pipelines.shards.store import to_json
from assay.requests.batching import shard


def dataset_rows(dataset: Any) -> list[dict[str, Any]]:
    """Rows of a `datasets.Dataset`, a list of dicts or a dict of equally long lists."""
    if hasattr(dataset, "to_list") and hasattr(dataset, "column_names"):
        rows = dataset.to_list()
    elif isinstance(dataset, Mapping):
        lengths = {k: len(v) for k, v in dataset.items()}
        if len(set(lengths.values())) > 1:
            raise DataError(f"run_evals dataset: columns differ in length: {lengths}")
        keys = list(dataset)
        n = next(iter(lengths.values()), 0)
        rows = [{k: dataset[k][i] for k in keys} for i in range(n)]
    elif isinstance(dataset, Sequence) and not isinstance(dataset, str):
        rows = list(dataset)
        bad = next((i for i, r in enumerate(rows) if not isinstance(r, Mapping)), None)
        if bad is not None:
            raise DataError(
                f"run_evals dataset: row {bad} is a {type(rows[bad]).__name__}, not a dict"
            )
        rows = [dict(r) for r in rows]
    else:
        raise DataError(
            "run_evals dataset must be a datasets.Dataset, a list of dicts or a dict of lists; "
            f"got {type(dataset).__name__}"
        )
    if not rows:
        raise DataError("run_evals dataset is empty")
    return rows


def dataset_fingerprint(rows: Sequence[Mapping[str, Any]]) -> str:
    """Hash of the rows' content (a resumed experiment must see the same data)."""
    return hashlib.sha256(to_json(list(rows)).encode()).hexdigest()[:16]


def shard_plan(n_rows: int, num_shards: int, seed: int) -> tuple[list[int], list[list[int]]]:
    """The seeded permutation of row positions and the rows of each shard."""
    if isinstance(num_shards, bool) or not isinstance(num_shards, int) or num_shards < 1:
        raise DataError(f"run_evals num_shards must be a positive integer, got {num_shards!r}")
    if num_shards > n_rows:
        raise DataError(f"run_evals num_shards={num_shards} is more than the {n_rows} rows")
    order = list(range(n_rows))
    random.Random(seed).shuffle(order)
    return order, [[order[i] for i in shard(n_rows, s, num_shards)] for s in range(num_shards)]
