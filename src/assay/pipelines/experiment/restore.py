"""Bring a config of an interrupted experiment back: its completed shards, and its clones."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from assay.errors import ConfigError
from assay.pipelines.configs.eval_config import EvalConfig, validate
from assay.pipelines.configs.fingerprint import fingerprint
from assay.pipelines.experiment.cloning import apply_changes
from assay.pipelines.shards.live_metrics import ConfigMetrics
from assay.pipelines.shards.store import ExperimentStore


@dataclass(frozen=True)
class Restored:
    """What a config had when the experiment stopped."""

    records: list[dict[str, Any]]
    seconds: float
    first_error: tuple[int, str] | None
    """(row index, message) of its first failed row."""


def restore_shards(
    store: ExperimentStore, cid: int, completed: list[int], metrics: ConfigMetrics
) -> Restored:
    """Feed the stored rows of `completed` shards into `metrics`, shard by shard as they ran
    (the anytime sequences are read at shard ends)."""
    rows = store.rows(cid)
    batches = store.batch_metrics(cid)
    for shard in completed:
        mine = [r for r in rows if r.shard == shard]
        ok = [r for r in mine if r.error is None]
        for _, entries in (b for b in batches if b[0] == shard):
            metrics.add_batch(0, 0, entries, {})
        names = dict.fromkeys(name for r in ok for name in r.scores)
        metrics.add_batch(
            len(ok),
            len(mine) - len(ok),
            None,
            {name: [r.scores[name] for r in ok if name in r.scores] for name in names},
            [r.row_index for r in ok],
        )
        metrics.end_shard()
    return Restored(
        records=[r.record for r in rows if r.error is None],
        seconds=store.shard_seconds(cid),
        first_error=next(((r.row_index, r.error) for r in rows if r.error is not None), None),
    )


def rebuild_clone(configs: Mapping[int, EvalConfig], stored: dict[str, Any]) -> EvalConfig:
    """A stored clone's changes re-applied to its parent (ConfigError says why they cannot be)."""
    cid, parent_id = stored["config_id"], stored["parent_id"]
    parent = configs.get(parent_id)
    if parent is None:
        raise ConfigError(f"its parent config {parent_id} is not part of this run")
    if stored["changes"] is None:
        raise ConfigError("its changes held functions, objects or secrets, never stored")
    leaf = apply_changes(parent.leaf, stored["changes"])
    if fingerprint(leaf) != stored["fingerprint"]:
        raise ConfigError(f"config {parent_id} changed since it was cloned")
    return validate(leaf, cid, parent_id=parent_id)
