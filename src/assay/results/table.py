"""The results table, in lm-eval's markdown layout."""

from __future__ import annotations

from typing import Any

_ARROW = {True: "↑", False: "↓", None: " "}


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _version(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def make_table(results: dict[str, Any], section: str = "results") -> str:
    """Markdown table of one section ("results" or "groups") of a results dict."""
    header = ["Tasks", "Version", "Filter", "n-shot", "Metric", "", "Value", "", "Stderr"]
    rows: list[list[str]] = []
    versions, nshot = results.get("versions", {}), results.get("n-shot", {})
    higher = results.get("higher_is_better", {})
    for name, entry in results.get(section, {}).items():
        alias = entry.get("alias", name)
        first = True
        for key, value in entry.items():
            if "," not in key or "_stderr," in key:
                continue
            metric, flt = key.split(",", 1)
            stderr = entry.get(f"{metric}_stderr,{flt}", "")
            stderr_text = "N/A" if stderr == "N/A" else _fmt(stderr)
            rows.append(
                [
                    alias if first else "",
                    _version(versions.get(name, "")) if first else "",
                    flt,
                    str(nshot.get(name, "")),
                    metric,
                    _ARROW.get(higher.get(name, {}).get(metric)),
                    _fmt(value),
                    "±" if stderr != "" else "",
                    stderr_text,
                ]
            )
            first = False
    if not rows:
        return ""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    right = {1, 3, 6, 8}

    def line(cells: list[str]) -> str:
        return (
            "|"
            + "|".join(
                c.rjust(w) if i in right else c.ljust(w)
                for i, (c, w) in enumerate(zip(cells, widths))
            )
            + "|"
        )

    sep = (
        "|"
        + "|".join(("-" * (w - 1) + ":") if i in right else "-" * w for i, w in enumerate(widths))
        + "|"
    )
    return "\n".join([line(header), sep, *(line(r) for r in rows)])
