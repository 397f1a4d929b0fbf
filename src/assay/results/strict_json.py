"""Strict JSON for output files: no `Infinity`/`NaN` (not JSON); each non-finite number is
written as `null` and named in a note, so readers see what was there."""

from __future__ import annotations

import math
from typing import Any

NOTE_KEY = "non_finite_values"


def finite_only(value: Any, path: str = "", found: dict[str, str] | None = None) -> Any:
    """`value` with every non-finite float replaced by None; `found` maps each replaced
    value's path (keys joined by "/") to what it was ("inf", "-inf", "nan")."""
    if isinstance(value, float) and not math.isfinite(value):
        if found is not None:
            found[path] = repr(value)
        return None
    if isinstance(value, dict):
        return {
            k: finite_only(v, f"{path}/{k}" if path else str(k), found) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [finite_only(v, f"{path}/{i}", found) for i, v in enumerate(value)]
    return value


def strict_results(results: dict[str, Any]) -> dict[str, Any]:
    """The results dict with non-finite numbers as null and, only when there were any, a
    top-level `non_finite_values` note mapping each one's path to its value (lm-eval readers
    ignore the extra key; files without non-finite values are unchanged)."""
    found: dict[str, str] = {}
    clean = finite_only(results, "", found)
    if found:
        clean[NOTE_KEY] = found
    return clean
