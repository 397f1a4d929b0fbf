"""Checks shared by metric factories on the options a task passes them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from assay.errors import ConfigError


def reject_unknown(metric: str, unknown: dict[str, Any], accepted: Iterable[str] = ()) -> None:
    """ConfigError naming `metric` if a task passed options it does not take."""
    if not unknown:
        return
    names = ", ".join(repr(key) for key in sorted(unknown))
    accepted = sorted(accepted)
    takes = f"it accepts {', '.join(accepted)}" if accepted else "it takes no options"
    raise ConfigError(
        f"metric {metric!r} does not accept option(s) {names}: {takes}. Remove them from the "
        "metric's entry in metric_list (aggregation and higher_is_better are set on the entry, "
        "not passed to the metric)"
    )


def compile_patterns(metric: str, option: str, patterns: Any) -> list[re.Pattern[str]]:
    """Compile a list of regular expressions given as a metric option."""
    if patterns is None:
        return []
    if isinstance(patterns, str) or not isinstance(patterns, list | tuple):
        raise ConfigError(
            f"metric {metric!r}: {option} must be a list of regular expressions, got "
            f"{patterns!r}; write it as a YAML list"
        )
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except (re.error, TypeError) as exc:
            raise ConfigError(
                f"metric {metric!r}: {option} entry {pattern!r} is not a valid regular "
                f"expression ({exc}); fix or remove it"
            ) from None
    return compiled


def check_flag(metric: str, option: str, value: Any) -> bool:
    """A boolean metric option (0/1 allowed), refusing strings such as "false" that would
    otherwise read as true."""
    if not isinstance(value, bool | int):
        raise ConfigError(f"metric {metric!r}: {option} must be true or false, got {value!r}")
    return bool(value)
