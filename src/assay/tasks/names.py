"""Task strings as users type them: several names per --tasks value, comma separated."""

from __future__ import annotations

from collections.abc import Sequence


def split_csv(values: Sequence[str] | None) -> list[str]:
    """Task names from --tasks values, each of which may list several, comma separated."""
    out: list[str] = []
    for value in values or []:
        out += [v for v in value.split(",") if v.strip()]
    return out
