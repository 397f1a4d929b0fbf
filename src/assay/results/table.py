"""The printed results table, cell for cell as lm-eval prints it (same writer, same order)."""

from __future__ import annotations

from typing import Any

from assay.results.schema import CLUSTERED_SUFFIX
from assay.results.stderr_notes import NOTES_KEY

_ARROWS = {True: "↑", False: "↓"}
UNMEASURED = "n/a†"
UNMEASURED_NOTE = (
    "† stderr 0 in results.json: no spread was measured (every doc scored the same),"
    " so no interval is shown"
)


def _display_order(
    group_subtasks: dict[str, list[str]], names: set[str]
) -> tuple[dict[str, int], list[str]]:
    """Depth of each name in the group tree and the names in display order.

    Top-level groups come alphabetically, each followed by its subtasks (alphabetically,
    recursively); names in no group follow, alphabetically.
    """
    depth: dict[str, int] = {}
    order: list[str] = []

    def visit(name: str, level: int) -> None:
        depth[name] = level
        if name in names:
            order.append(name)
        for child in sorted(group_subtasks.get(name, [])):
            visit(child, level + 1)

    children = {c for members in group_subtasks.values() for c in members}
    for name in sorted(group_subtasks):
        if name not in children:
            visit(name, 0)
    order += [name for name in sorted(names) if name not in depth]
    return depth, order


def table_rows(results: dict[str, Any], section: str = "results") -> list[list[Any]]:
    """The table's rows: one per (task or group, metric, filter), metrics alphabetically."""
    entries = results.get(section, {})
    notes = results.get(NOTES_KEY, {})
    depth, order = _display_order(results.get("group_subtasks", {}), set(entries))
    rows: list[list[Any]] = []
    for name in order:
        entry = dict(entries[name])
        label = entry.pop("alias", name)
        for meta in ("name", "sample_len", "sample_count"):
            entry.pop(meta, None)
        if depth.get(name, 0):
            label = " " * depth[name] + "- " + label
        version: Any = results.get("versions", {}).get(name, "    N/A")
        shots = str(results.get("n-shot", {}).get(name, " "))
        higher = results.get("higher_is_better", {}).get(name, {})
        for key, value in sorted(entry.items()):
            metric, _, flt = key.partition(",")
            if metric.endswith("_stderr"):
                continue
            shown = f"{value:.4f}" if isinstance(value, float) else value
            if isinstance(value, float) and key in notes.get(name, {}):
                shown += "†"  # a measured clustered stderr that is unreliable (the footnote)
            arrow = _ARROWS.get(higher.get(metric), "")
            stderr_key = f"{metric}_stderr,{flt}"
            if stderr_key in entry:
                stderr = entry[stderr_key]
                if stderr == "N/A":
                    stderr = "   N/A" + ("†" if stderr_key in notes.get(name, {}) else "")
                elif stderr == 0:  # lm-eval prints "± 0"; nothing was measured
                    stderr = UNMEASURED
                else:
                    mark = "†" if stderr_key in notes.get(name, {}) else ""
                    stderr = f"{stderr:.4f}{mark}"
                rows.append([label, version, flt, shots, metric, arrow, shown, "±", stderr])
            else:
                rows.append([label, version, flt, shots, metric, arrow, shown, "", ""])
            label = version = ""
    return rows


def make_table(results: dict[str, Any], section: str = "results") -> str:
    """Markdown table of one section ("results" or "groups") of a results dict."""
    from pytablewriter import MarkdownTableWriter

    writer = MarkdownTableWriter()
    writer.headers = [
        "Groups" if section == "groups" else "Tasks",
        "Version",
        "Filter",
        "n-shot",
        "Metric",
        "",
        "Value",
        "",
        "Stderr",
    ]
    writer.value_matrix = table_rows(results, section)
    return writer.dumps()


def results_tables(results: dict[str, Any]) -> str:
    """The printed tables: tasks, then groups when there are any, then the note on `n/a†`
    when a row has a spread that was not measured."""
    tables = [make_table(results, "results")]
    if results.get("groups"):
        tables.append(make_table(results, "groups"))
    text = "\n\n".join(table.rstrip("\n") for table in tables)
    footnotes = _footnotes(results)
    if not footnotes and UNMEASURED in text:  # a file written before stderr_notes existed
        footnotes = [UNMEASURED_NOTE]
    return "\n".join([text, *footnotes])


def _footnotes(results: dict[str, Any]) -> list[str]:
    """One line per reason in results.json's stderr_notes, naming the cells it marks (the
    table's stderrs, and the clustered stderrs it shows as rows)."""
    cells: dict[str, list[str]] = {}
    for name, notes in results.get(NOTES_KEY, {}).items():
        for key, why in notes.items():
            metric, _, flt = key.partition(",")
            if metric.endswith("_stderr") or metric.endswith(CLUSTERED_SUFFIX):
                cells.setdefault(why, []).append(f"{name} {metric.removesuffix('_stderr')},{flt}")
    lines = []
    for why, where in cells.items():
        shown = ", ".join(where[:6]) + (f" and {len(where) - 6} more" if len(where) > 6 else "")
        lines.append(f"† {why} ({shown})")
    return lines
