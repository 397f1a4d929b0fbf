"""Fair round-robin scheduling of shards over configs."""

from __future__ import annotations

import pytest

from assay.errors import ConfigError
from assay.pipelines.shards.scheduler import ShardScheduler, Status


def drain(s: ShardScheduler, loaded: str | None = None) -> list[tuple[int, int]]:
    order = []
    while (pick := s.next(loaded)) is not None:
        order.append(pick)
        s.complete(*pick)
    return order


def test_round_robin_keeps_configs_within_one_shard() -> None:
    s = ShardScheduler(3)
    for cid in (1, 2, 3):
        s.add(cid, "m")
    order = drain(s)
    assert order == [(1, 0), (2, 0), (3, 0), (1, 1), (2, 1), (3, 1), (1, 2), (2, 2), (3, 2)]
    assert all(s.status(c) == Status.COMPLETED for c in (1, 2, 3))


def test_loaded_engine_breaks_ties_without_breaking_fairness() -> None:
    s = ShardScheduler(2)
    s.add(1, "a")
    s.add(2, "b")
    s.add(3, "b")
    assert s.next("b") == (2, 0)
    s.complete(2, 0)
    assert s.next("b") == (3, 0)  # same engine first among the least advanced
    s.complete(3, 0)
    assert s.next("b") == (1, 0)  # but config 1 is behind, so it goes next whatever is loaded


def test_resumed_and_cloned_configs_join_at_their_shard() -> None:
    s = ShardScheduler(4)
    s.add(1, "m", shards_done=2)
    s.add(2, "m")
    assert drain(s)[:3] == [(2, 0), (2, 1), (1, 2)]


def test_stop_resume_delete() -> None:
    s = ShardScheduler(2)
    s.add(1, "m")
    s.add(2, "m")
    s.stop(1)
    assert drain(s) == [(2, 0), (2, 1)]
    with pytest.raises(ConfigError):
        s.stop(1)
    s.resume(1)
    assert s.next() == (1, 0)
    s.delete(1)
    assert s.next() is None and s.status(1) == Status.DELETED
    with pytest.raises(ConfigError, match="no config"):
        s.stop(9)
