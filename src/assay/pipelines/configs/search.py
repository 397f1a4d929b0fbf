"""The searches over an eval config's knobs: GridSearch (every combination) and RandomSearch
(distinct draws), with RapidFire's names for them."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from assay.errors import ConfigError
from assay.pipelines.configs.fingerprint import fingerprint
from assay.pipelines.configs.knobs import RangeDraws, draw, grid


class GridSearch:
    """Cartesian product of every `List` in one config dict or a list of them."""

    def __init__(self, configs: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        self.configs = [configs] if isinstance(configs, Mapping) else list(configs)
        if not self.configs:
            raise ConfigError("GridSearch needs at least one config dict")

    def get_runs(self, seed: int = 42) -> list[dict[str, Any]]:
        """The leaf configs, in a deterministic order (the seed draws any `Range` once)."""
        draws = RangeDraws(random.Random(seed))
        return [dict(leaf) for config in self.configs for leaf in grid(config, draws)]


class RandomSearch:
    """`num_runs` distinct configs drawn from one config dict or a list of them."""

    def __init__(
        self,
        configs: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        num_runs: int = 1,
        seed: int | None = None,
    ) -> None:
        self.configs = [configs] if isinstance(configs, Mapping) else list(configs)
        if not self.configs:
            raise ConfigError("RandomSearch needs at least one config dict")
        if isinstance(num_runs, bool) or not isinstance(num_runs, int) or num_runs < 1:
            raise ConfigError(f"RandomSearch num_runs must be a positive integer, got {num_runs!r}")
        self.num_runs = num_runs
        self.seed = seed
        """Overrides the run seed when given."""

    def get_runs(self, seed: int = 42) -> list[dict[str, Any]]:
        """Up to `num_runs` distinct leaf configs (fewer if the space is smaller)."""
        rng = random.Random(self.seed if self.seed is not None else seed)
        runs: list[dict[str, Any]] = []
        seen: set[str] = set()
        for _ in range(self.num_runs * 20):
            if len(runs) == self.num_runs:
                break
            leaf = draw(rng.choice(self.configs), rng)
            key = fingerprint(leaf)
            if key not in seen:
                seen.add(key)
                runs.append(dict(leaf))
        return runs


RFGridSearch = GridSearch
RFRandomSearch = RandomSearch
