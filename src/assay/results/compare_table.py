"""`assay compare`'s printed output: the comparison table (terminal or markdown), what was
paired, and what differs between the runs."""

from __future__ import annotations

import math
from typing import Any

from assay.results.compare import CompareReport, Comparison
from assay.results.compare_generations import ending_lines
from assay.stats.paired_result import interval_noted

HEADERS = [
    "",
    "Task",
    "Metric",
    "Filter",
    "A",
    "B",
    "n",
    "Mean A",
    "Mean B",
    "Diff",
    "CI",
    "p",
    "p (Holm)",
    "McNemar",
    "MDE",
    "Clusters",
    "Method",
]


def _number(value: float | None, digits: int = 4, signed: bool = False) -> str:
    """`digits` decimals; significant digits where decimals would hide the value (a nonzero
    value that reads 0.0000, an interval that looks zero-wide) or spell out hundreds of
    digits (values of 1e6 and more)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    sign = "+" if signed else ""
    if value != 0 and not 0.5 * 10**-digits <= abs(value) < 1e6:
        return f"{value:{sign}.{digits}g}"
    return f"{value:{sign}.{digits}f}"


def _p(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return "<0.0001" if 0 < value < 1e-4 else f"{value:.4f}"


MARK = "†"
"""Marks the cells of a row whose statistics could not all be estimated; the row's note,
after the table, says what is missing and which substitute stands in."""


def _marked(c: Comparison, text: str, substitute: bool = True) -> str:
    """A cell of a row with a note: "n/a†" where the value is missing, the value with "†"
    where a substitute (the exact bound) may have produced it: the interval and the MDE."""
    if c.note is None:
        return text
    if text in ("-", "[-, -]"):
        return f"n/a{MARK}"
    return text + MARK if substitute else text


def table_rows(report: CompareReport) -> list[list[str]]:
    """One row per comparison; the first cell is "*" for significant rows."""
    return [_cells(c) for c in report.comparisons]


def _cells(c: Comparison) -> list[str]:
    ci = f"[{_number(c.ci_low, signed=True)}, {_number(c.ci_high, signed=True)}]"
    return [
        "*" if c.significant() else "",
        c.task,
        c.metric,
        c.filter,
        c.a,
        c.b,
        str(c.n),
        _number(c.mean_a),
        _number(c.mean_b),
        _number(c.diff, signed=True),
        _marked(c, ci) if interval_noted(c.note) else ci,
        _marked(c, _p(c.p_value), substitute=False),
        _marked(c, _p(c.p_value_holm), substitute=False),
        _p(c.mcnemar_p),
        _marked(c, _number(c.mde)),
        "-" if c.clusters is None else str(c.clusters),
        c.method,
    ]


def _headers(report: CompareReport) -> list[str]:
    headers = list(HEADERS)
    headers[HEADERS.index("CI")] = f"{report.confidence:.0%} CI"
    return headers


def render_text(report: CompareReport) -> str:
    """The terminal output: the table in aligned columns, then the notes."""
    rows = [_headers(report), *table_rows(report)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join([*lines, "", *notes(report)]).rstrip() + "\n"


def render_markdown(report: CompareReport) -> str:
    """The table as markdown, then the notes."""
    # Cells are written as formatted here (a table writer would re-type "1.0000" as 1).
    headers = _headers(report)
    lines = [_markdown_row(headers), _markdown_row(["---"] * len(headers))]
    lines += [_markdown_row(row) for row in table_rows(report)]
    return "\n".join([*lines, "", *notes(report)]).rstrip() + "\n"


def _markdown_row(cells: list[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def notes(report: CompareReport) -> list[str]:
    """The lines after the table: significance legend, docs paired, flags, what differs."""
    alpha = 1 - report.confidence
    tested = sum(1 for c in report.comparisons if c.p_value_holm is not None)
    untested = len(report.comparisons) - tested
    lines = [
        f"* significant: Holm-adjusted p < {alpha:.2g} over the {tested} comparisons with a "
        "p-value above"
        + (f" ({untested} without one left out of Holm)" if untested else "")
        + ". Diff = B - A."
    ]
    lines += [
        f"{MARK} {c.task} {c.metric},{c.filter} ({c.a} -> {c.b}): {c.note}."
        for c in report.comparisons
        if c.note is not None
    ]
    for pair in report.pairs:
        lines.append("")
        lines.append(f"{pair.a} -> {pair.b}")
        paired = ", ".join(f"{t} {n}" for t, n in pair.paired_docs.items())
        lines.append(f"  docs paired: {paired}")
        for task, (only_a, only_b) in pair.unpaired_docs.items():
            lines.append(
                f"  {task}: {only_a} doc(s) only in {pair.a}, {only_b} only in {pair.b} (left out)"
            )
        for task, (count, first) in pair.prompt_mismatches.items():
            lines.append(
                f"  PROMPTS DIFFER in {task}: {count} paired doc(s), first doc {first} "
                "(--allow-prompt-mismatch): the difference measures the prompts too"
            )
            if task in pair.prompt_causes:
                lines.append(f"    cause: {pair.prompt_causes[task]}")
        if pair.only_in_one:
            lines.append(f"  tasks in one run only (not compared): {', '.join(pair.only_in_one)}")
        for reason in pair.skipped:
            lines.append(f"  not compared: {reason}")
        lines += ending_lines(pair.generations, pair.a, pair.b)
        if pair.differs:
            lines.append("  what differs:")
            for key, value_a, value_b in pair.differs:
                lines.append(f"    {key}: {_show(value_a)} | {_show(value_b)}")
        else:
            lines.append("  what differs: nothing recorded")
    if report.api_usage:
        lines += ["", "API usage (requests, 429s, tokens in / out, cost):"]
        lines += [f"  {label}: {api_usage_line(u)}" for label, u in report.api_usage.items()]
    return lines


def api_usage_line(usage: dict[str, Any]) -> str:
    """One run's API usage in a line: `300 requests (429 ×3), 1500 / 1200 tokens, $0.0039`."""
    cost = usage.get("cost_usd")
    shown = (
        f"${cost:.4f}"
        if isinstance(cost, int | float)
        else f"cost unknown ({usage.get('cost_note')})"
    )
    return (
        f"{usage.get('requests')} requests (429 ×{usage.get('rate_limited')}), "
        f"{usage.get('input_tokens')} / {usage.get('output_tokens')} tokens, {shown}"
    )


def _show(value: Any) -> str:
    import json

    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."
