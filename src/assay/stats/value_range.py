"""The range a bounded interval's values lie in, checked once for every method that takes one."""

from __future__ import annotations

from collections.abc import Sequence

from assay.errors import ConfigError


def check_range(value_range: Sequence[float]) -> tuple[float, float]:
    """`value_range` as (low, high) floats; a ConfigError unless it is two numbers, low < high."""
    try:
        low, high = (float(v) for v in value_range)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"value_range must be a (min, max) pair of numbers, got {value_range!r}"
        ) from exc
    if not low < high:
        raise ConfigError(f"value_range must have min < max, got {value_range!r}")
    return low, high
