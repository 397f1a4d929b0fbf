"""Knobs (`List`, `Range`) anywhere in an eval config, and how they expand (`grid`, `draw`).

A knob may sit at any depth: in the eval config dict, in a nested dict (``sampling_params``), in
a plain list, or in the constructor arguments of a `Configurable` object (model configs, RAG spec,
prompt manager). Grid search takes the cartesian product of every `List`; random search draws
each `List` and `Range` from a generator seeded by the run seed, so the same seed explores the
same configs. The searches themselves are in `pipelines.search`.
"""

from __future__ import annotations

import itertools
import logging
import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self

from assay.errors import ConfigError

log = logging.getLogger(__name__)


class List:
    """A categorical knob: one config per value under grid search, a uniform draw under random."""

    def __init__(self, values: Sequence[Any]) -> None:
        if not isinstance(values, list | tuple) or not values:
            raise ConfigError(f"List expects a non-empty list of values, got {values!r}")
        self.values = list(values)

    def sample(self, rng: random.Random | None = None) -> Any:
        """One value, uniformly (from `rng`, else Python's global generator, as RapidFire)."""
        return (rng or random).choice(self.values)

    def __repr__(self) -> str:
        return f"List({self.values!r})"


class Range:
    """A numeric knob on [start, end] for random search: uniform, log-uniform or stepped."""

    def __init__(
        self,
        start: float,
        end: float,
        dtype: str | None = None,
        log: bool = False,
        step: float | None = None,
    ) -> None:
        if isinstance(start, bool) or not isinstance(start, int | float):
            raise ConfigError(f"Range start must be a number, got {start!r}")
        if isinstance(end, bool) or not isinstance(end, int | float):
            raise ConfigError(f"Range end must be a number, got {end!r}")
        if dtype is None:
            dtype = "int" if isinstance(start, int) and isinstance(end, int) else "float"
        if dtype not in ("int", "float"):
            raise ConfigError(f"Range dtype must be 'int' or 'float', got {dtype!r}")
        if start > end:
            raise ConfigError(f"Range start {start} is greater than end {end}")
        if log and step is not None:
            raise ConfigError("Range: log=True and step are mutually exclusive")
        if log and start <= 0:
            raise ConfigError("Range: log=True needs start > 0")
        if step is not None and step <= 0:
            raise ConfigError(f"Range step must be positive, got {step!r}")
        self.start, self.end, self.dtype, self.log, self.step = start, end, dtype, log, step

    def draw(self, rng: random.Random) -> int | float:
        """One value from the range."""
        if self.step is not None:
            n_steps = math.floor((self.end - self.start) / self.step + 1e-9)
            value = self.start + rng.randint(0, n_steps) * self.step
        elif self.log:
            value = math.exp(rng.uniform(math.log(self.start), math.log(self.end)))
        elif self.dtype == "int":
            return rng.randint(int(self.start), int(self.end))
        else:
            value = rng.uniform(self.start, self.end)
        return round(value) if self.dtype == "int" else value

    def sample(self, rng: random.Random | None = None) -> int | float:
        """One value (from `rng`, else Python's global generator, as RapidFire's sample())."""
        # Seeded from the global generator, so random.seed(...) makes it reproducible.
        return self.draw(rng or random.Random(random.getrandbits(64)))

    def __repr__(self) -> str:
        step = f", step={self.step!r}" if self.step is not None else ""
        log = ", log=True" if self.log else ""
        return f"Range({self.start!r}, {self.end!r}, dtype={self.dtype!r}{step}{log})"


class Configurable:
    """An object rebuilt from its constructor arguments, which may contain knobs.

    Subclasses call ``self._remember(locals())`` first thing in ``__init__``; construction must
    not do heavy work, because knobs are only resolved after expansion.
    """

    _params: dict[str, Any]

    def _remember(self, arguments: Mapping[str, Any]) -> None:
        self._params = {k: v for k, v in arguments.items() if k not in ("self", "__class__")}

    def knob_params(self) -> dict[str, Any]:
        """The constructor arguments (possibly containing `List` / `Range`)."""
        return dict(self._params)

    def replace(self, **changes: Any) -> Self:
        """A new object with some constructor arguments changed."""
        return type(self)(**{**self._params, **changes})

    def describe(self) -> dict[str, Any]:
        """Knob values worth showing in tables, flattened one level (override to refine)."""
        return self.knob_params()


def has_knobs(value: Any) -> bool:
    """Whether `value` contains a `List` or `Range` anywhere."""
    if isinstance(value, List | Range):
        return True
    if isinstance(value, Configurable):
        return has_knobs(value.knob_params())
    if isinstance(value, Mapping):
        return any(has_knobs(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(has_knobs(v) for v in value)
    return False


def grid(value: Any, draws: RangeDraws | None = None) -> list[Any]:
    """Every concrete value `value` stands for: the cartesian product of all its `List`s.

    A `Range` cannot be enumerated: as in RapidFire, it is drawn once (from `draws`, seeded by
    the run seed) and that value is used by every config; the draw is logged.
    """
    draws = draws if draws is not None else RangeDraws(random.Random(42))
    if isinstance(value, List):
        return [leaf for option in value.values for leaf in grid(option, draws)]
    if isinstance(value, Range):
        return [draws.value(value)]
    if isinstance(value, Configurable):
        return [type(value)(**params) for params in grid(value.knob_params(), draws)]
    if isinstance(value, Mapping):
        if not has_knobs(value):
            return [value]
        keys = list(value)
        options = [grid(value[k], draws) for k in keys]
        return [dict(zip(keys, combo)) for combo in itertools.product(*options)]
    if isinstance(value, list | tuple) and has_knobs(value):
        options = [grid(v, draws) for v in value]
        return [type(value)(combo) for combo in itertools.product(*options)]
    return [value]


class RangeDraws:
    """One draw per `Range` object during a grid expansion (the same object, the same value)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self._drawn: dict[int, tuple[Range, int | float]] = {}

    def value(self, knob: Range) -> int | float:
        if id(knob) not in self._drawn:
            drawn = knob.draw(self.rng)
            self._drawn[id(knob)] = (knob, drawn)  # holding the Range keeps its id unique
            log.info(
                "grid search: %r cannot be enumerated; drawn once as %r for every config "
                "(use List([...]) to sweep it)",
                knob,
                drawn,
            )
        return self._drawn[id(knob)][1]


def draw(value: Any, rng: random.Random) -> Any:
    """One concrete value of `value`, drawing every `List` and `Range` from `rng`."""
    if isinstance(value, List):
        return draw(rng.choice(value.values), rng)
    if isinstance(value, Range):
        return value.draw(rng)
    if isinstance(value, Configurable):
        return type(value)(**draw(value.knob_params(), rng))
    if isinstance(value, Mapping):
        return {k: draw(v, rng) for k, v in value.items()} if has_knobs(value) else value
    if isinstance(value, list | tuple) and has_knobs(value):
        return type(value)(draw(v, rng) for v in value)
    return value


def describe_value(value: Any) -> Any:
    """A JSON-friendly, human-readable stand-in for a config value."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Configurable):
        return {k: describe_value(v) for k, v in value.describe().items()}
    if isinstance(value, Mapping):
        return {str(k): describe_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [describe_value(v) for v in value]
    if isinstance(value, type):
        return value.__name__
    if callable(value) and hasattr(value, "__qualname__"):
        return value.__qualname__
    return type(value).__name__


def flatten_knobs(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted-path view of a leaf config, e.g. {"pipeline.sampling_params.temperature": 0.7}."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        described = describe_value(value)
        if isinstance(described, dict) and described:
            out.update(flatten_knobs(described, f"{path}."))
        else:
            out[path] = described
    return out


ConfigFilter = Callable[[dict[str, Any]], bool]
