"""Fair round-robin over configs, one shard at a time.

The next shard always goes to an active config with the fewest completed shards, so all active
configs stay within one shard of each other and every config's estimate sharpens at the same
pace. Among equally advanced configs, one whose engine is already loaded goes first (fewer model
swaps, same fairness), then the lowest id. Pure state: no I/O, no threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from assay.errors import ConfigError


class Status(StrEnum):
    """Lifecycle of a config inside an experiment."""

    NEW = "new"
    ONGOING = "ongoing"
    COMPLETED = "completed"
    STOPPED = "stopped"
    DELETED = "deleted"
    FAILED = "failed"


ACTIVE = (Status.NEW, Status.ONGOING)


@dataclass(slots=True)
class ConfigState:
    """Scheduling state of one config."""

    config_id: int
    engine_key: str
    shards_done: int = 0
    status: Status = Status.NEW


class ShardScheduler:
    """Decides which config processes which shard next."""

    def __init__(self, num_shards: int) -> None:
        self.num_shards = num_shards
        self.configs: dict[int, ConfigState] = {}

    def add(
        self, config_id: int, engine_key: str, shards_done: int = 0, status: Status = Status.NEW
    ) -> None:
        """Register a config (new, cloned, or resumed from stored progress)."""
        if shards_done >= self.num_shards and status in ACTIVE:
            status = Status.COMPLETED
        self.configs[config_id] = ConfigState(config_id, engine_key, shards_done, status)

    def _state(self, config_id: int) -> ConfigState:
        if config_id not in self.configs:
            raise ConfigError(f"no config with id {config_id}; known ids: {sorted(self.configs)}")
        return self.configs[config_id]

    def next(self, loaded_engine: str | None = None) -> tuple[int, int] | None:
        """(config id, shard index) to run next, or None when no config is active."""
        active = [s for s in self.configs.values() if s.status in ACTIVE]
        if not active:
            return None
        best = min(
            active,
            key=lambda s: (s.shards_done, s.engine_key != loaded_engine, s.config_id),
        )
        return best.config_id, best.shards_done

    def complete(self, config_id: int, shard: int) -> None:
        """Record that `config_id` finished `shard`."""
        state = self._state(config_id)
        if shard != state.shards_done:
            raise ValueError(
                f"config {config_id} finished shard {shard}, expected {state.shards_done}"
            )
        state.shards_done += 1
        if state.status == Status.NEW:
            state.status = Status.ONGOING
        if state.shards_done >= self.num_shards and state.status in ACTIVE:
            state.status = Status.COMPLETED

    def stop(self, config_id: int) -> None:
        state = self._state(config_id)
        if state.status not in ACTIVE:
            raise ConfigError(f"config {config_id} is {state.status.value}; only active ones stop")
        state.status = Status.STOPPED

    def resume(self, config_id: int) -> None:
        state = self._state(config_id)
        if state.status != Status.STOPPED:
            raise ConfigError(
                f"config {config_id} is {state.status.value}; only stopped ones resume"
            )
        if state.shards_done >= self.num_shards:
            state.status = Status.COMPLETED
        else:
            state.status = Status.ONGOING if state.shards_done else Status.NEW

    def delete(self, config_id: int) -> None:
        self._state(config_id).status = Status.DELETED

    def fail(self, config_id: int) -> None:
        self._state(config_id).status = Status.FAILED

    def status(self, config_id: int) -> Status:
        return self._state(config_id).status
