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


def restore_non_finite(value: dict[str, Any]) -> dict[str, Any]:
    """A dict read back from strict JSON with its `non_finite_values` note applied: each noted
    null is the float it was (inf, -inf, nan) again, and the note is removed. A path that no
    longer leads to a null is left alone."""
    found = value.pop(NOTE_KEY, None)
    if not isinstance(found, dict):
        return value
    for path, what in found.items():
        try:
            number = float(what)
        except (TypeError, ValueError):
            continue
        *parents, last = str(path).split("/")
        node: Any = value
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else _item(node, part)
        if isinstance(node, dict) and node.get(last, 0) is None:
            node[last] = number
        elif isinstance(node, list) and _item(node, last, missing=0) is None:
            node[int(last)] = number
    return value


def _item(node: Any, part: str, missing: Any = None) -> Any:
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return node[int(part)]
    return missing
