"""`assay report`: runs (assay or lm-eval folders) as one self-contained HTML page.

The page holds everything it shows, so it opens offline and can be mailed or archived:

- the summary of every run (metric ± stderr, clustered stderr, n, time, tokens per task, and
  how generations ended: truncated and unclosed-thinking rates per task);
- with two runs or more, `assay compare`'s paired comparison (results/compare.py, unchanged)
  as a forest plot and a table, and the "what differs" provenance of each pair;
- per-task plots computed here from the samples (score distribution, score by cluster, score
  by prompt length);
- a sample browser over every samples record, compressed (gzip, base64) into the page and
  decoded by the browser's own DecompressionStream, rendered a page at a time, so a run of
  100k samples stays usable; it filters by text, flips, score range, and generations that
  hit the token cap or ended while still thinking; agent samples show their transcripts turn
  by turn and filter by failed calls, hit limits and wrong final answers
  (report_transcripts.py).

Plots are small chart descriptions built here (bars, lines, a forest of intervals); the page's
own script draws them as inline SVG, its text set as text (a task name or run label holding
markup shows as written, never as markup), with no charting library: the page of a small run
weighs tens of kilobytes, not the megabytes of an inlined plotting bundle.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from assay.errors import ConfigError
from assay.results.compare import CompareOptions, CompareReport, Comparison, compare_runs
from assay.results.readers import Run
from assay.results.report_transcripts import transcript_fields, transcripts_script
from assay.results.schema import (
    SampleRecord,
    clustered_stderr_key,
    metric_columns,
    metric_key,
    sample_metric_values,
    stderr_key,
)
from assay.results.stderr_notes import NOTES_KEY
from assay.results.strict_json import finite_only
from assay.stats.paired_result import interval_noted

LENGTH_BINS = 10
"""Prompt-length bins of the "score by prompt length" plot (deciles of the prompt lengths)."""
SCORE_BINS = 20
"""Bins of the score histogram for metrics that are not 0/1."""


@dataclass(frozen=True)
class SummaryRow:
    """One (task or group, metric, filter) of the summary table; values per run label."""

    name: str
    is_group: bool
    metric: str
    filter: str
    values: dict[str, float | None]
    stderrs: dict[str, float | None]
    clustered: dict[str, float | None]
    n: dict[str, int | None]
    stderr_notes: dict[str, str | None]
    """Per run, why its stderr is 0 or "N/A", or why a measured one is unreliable
    (results.json's stderr_notes), or None."""
    clustered_notes: dict[str, str | None]
    """Per run, why its clustered stderr is unreliable (results.json's stderr_notes), or None."""


def build_report(runs: Sequence[Run], options: CompareOptions | None = None) -> str:
    """The report page for `runs` (HTML text)."""
    if not runs:
        raise ConfigError("assay report needs at least one run.")
    labels = [run.label for run in runs]
    if len(set(labels)) != len(labels):
        raise ConfigError(
            f"runs are labelled {labels}: labels must differ. Name them with --labels a,b,..."
        )
    comparison = compare_runs(runs, None, options) if len(runs) > 1 else None
    samples = _sample_table(runs)
    page = {
        "runs": [_run_header(run) for run in runs],
        "summary": [row.__dict__ for row in summary_rows(runs)],
        "timings": _timings(runs),
        "generations": _generations(runs),
        "comparisons": _comparisons(comparison),
        "pairs": _pairs(comparison),
        "figures": _figures(runs, comparison, samples),
        "primary": {task: list(key) for task, key in _primary_metrics(runs).items()},
    }
    template = resources.files("assay.results").joinpath("report_page.html").read_text("utf-8")
    fills = {
        "/*TRANSCRIPTS_JS*/": transcripts_script(),
        "/*PAGE_DATA*/": _script_json(page),
        "SAMPLES_GZIP_BASE64": _compressed(samples),
        "REPORT_TITLE": html.escape(" vs ".join(labels)),
    }
    # One pass over the template, so no filled text is searched for markers again.
    return re.sub("|".join(re.escape(marker) for marker in fills), lambda m: fills[m[0]], template)


# ---------------------------------------------------------------------- summary
def summary_rows(runs: Sequence[Run]) -> list[SummaryRow]:
    """Every (task or group, metric, filter) any run scored, groups first, in results order."""
    seen: dict[tuple[str, str, str], SummaryRow] = {}
    for run in runs:
        groups = set(run.groups())
        for name, entry in run.results.get("results", {}).items():
            for metric, flt in metric_columns(entry):
                key = (name, metric, flt)
                row = seen.setdefault(
                    key, SummaryRow(name, name in groups, metric, flt, {}, {}, {}, {}, {}, {})
                )
                row.values[run.label] = _number(entry.get(metric_key(metric, flt)))
                row.stderrs[run.label] = _number(entry.get(stderr_key(metric, flt)))
                row.clustered[run.label] = _number(entry.get(clustered_stderr_key(metric, flt)))
                row.n[run.label] = _docs(run, name)
                every: Any = run.results.get(NOTES_KEY, {})
                notes: dict[str, Any] = every.get(name, {})
                row.stderr_notes[run.label] = notes.get(stderr_key(metric, flt))
                row.clustered_notes[run.label] = notes.get(clustered_stderr_key(metric, flt))
    return sorted(seen.values(), key=lambda r: not r.is_group)


def _docs(run: Run, name: str) -> int | None:
    counts: Any = run.results.get("n-samples", {})
    if name in counts:
        return int(counts[name].get("effective", 0))
    entry = run.entry(name) or {}
    return entry.get("sample_len") if isinstance(entry.get("sample_len"), int) else None


def _timings(runs: Sequence[Run]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per run label, per task: seconds, input and generated tokens (what the run recorded)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        assay = run.results.get("assay", {})
        timings = assay.get("timings", {})
        requests = assay.get("requests", {})
        out[run.label] = {
            task: {
                "seconds": timings.get(task),
                "input_tokens": requests.get(task, {}).get("input_tokens"),
                "generated_tokens": requests.get(task, {}).get("generated_tokens"),
                "token_unit": requests.get(task, {}).get("token_unit"),
            }
            for task in run.tasks()
        }
    return out


def _generations(runs: Sequence[Run]) -> dict[str, dict[str, Any]]:
    """Per run label, results.json's `assay.generations` (per task and group: truncated and
    unclosed-thinking counts and rates); runs whose backend said nothing have none."""
    out: dict[str, dict[str, Any]] = {}
    for run in runs:
        assay = run.results.get("assay")
        entries = assay.get("generations") if isinstance(assay, dict) else None
        if isinstance(entries, dict) and entries:
            out[run.label] = entries
    return out


def _run_header(run: Run) -> dict[str, Any]:
    facts = run.facts()
    return {
        "label": run.label,
        "path": str(run.path),
        "layout": run.layout,
        "model": facts.get("backend.model") or facts.get("backend.backend"),
        "model_args": facts.get("backend.model_args"),
        "date": run.results.get("date"),
        "total_seconds": _number(_float(run.results.get("total_evaluation_time_seconds"))),
        "api_usage": run.results.get("assay", {}).get("api_usage"),
    }


# ---------------------------------------------------------------------- comparison
def _comparisons(report: CompareReport | None) -> list[dict[str, Any]]:
    if report is None:
        return []
    rows = report.as_json()["comparisons"]
    for row, comparison in zip(rows, report.comparisons):
        row["significant"] = comparison.significant()
    return rows


def _pairs(report: CompareReport | None) -> list[dict[str, Any]]:
    return [] if report is None else report.as_json()["pairs"]


def forest_chart(comparisons: Sequence[Comparison]) -> dict[str, Any] | None:
    """The paired differences with their intervals, one row per comparison that has both
    (a chart the page draws: kind "forest")."""
    rows = [c for c in comparisons if _finite(c.diff, c.ci_low, c.ci_high)]
    if not rows:
        return None
    confidence = rows[0].confidence
    return {
        "kind": "forest",
        "title": f"Paired differences (b − a) with {confidence:.0%} intervals; red: "
        "significant after Holm",
        "x_title": "difference",
        "rows": [
            {
                # † as in the table: the interval is a conservative substitute its footnote names.
                "label": f"{c.task} · {c.metric} [{c.filter}] · {c.b} − {c.a}"
                f"{'†' if interval_noted(c.note) else ''}",
                "diff": c.diff,
                "low": c.ci_low,
                "high": c.ci_high,
                "significant": c.significant(),
                "hover": f"diff {c.diff:.4f} [{c.ci_low:.4f}, {c.ci_high:.4f}], Holm p "
                f"{_p_text(c.p_value_holm)}, n {c.n}, {c.method}",
            }
            for c in rows
        ],
    }


def _p_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


# ---------------------------------------------------------------------- samples
def _primary_metrics(runs: Sequence[Run]) -> dict[str, tuple[str, str]]:
    """Per task: the (metric, filter) the browser and plots use, the first the task reports."""
    out: dict[str, tuple[str, str]] = {}
    for run in runs:
        for task in run.tasks():
            columns = metric_columns(run.entry(task) or {})
            if task not in out and columns:
                out[task] = columns[0]
    return out


def _sample_table(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """One entry per (task, filter, doc id) any run logged: the doc once, and per run the
    record's arguments, responses, filtered responses, target and metric values."""
    table: dict[tuple[str, str, int], dict[str, Any]] = {}
    for index, run in enumerate(runs):
        for task in run.tasks():
            if not run.has_samples(task):
                continue
            for flt, docs in run.samples(task).by_filter.items():
                for doc_id, record in docs.items():
                    entry = table.setdefault(
                        (task, flt, doc_id),
                        {
                            "task": task,
                            "filter": flt,
                            "doc_id": doc_id,
                            "doc": record.get("doc"),
                            "runs": [None] * len(runs),
                        },
                    )
                    entry["runs"][index] = _sample_view(record)
    return [table[key] for key in sorted(table, key=lambda k: (k[0], k[1], k[2]))]


def _sample_view(record: SampleRecord) -> dict[str, Any]:
    return {
        "arguments": record.get("arguments", {}),
        "resps": record.get("resps"),
        "filtered": record.get("filtered_resps"),
        "target": record.get("target"),
        "metrics": {k: _jsonable(v) for k, v in sample_metric_values(record).items()},
        "cluster": record.get("cluster"),
        **_endings(record),
        **transcript_fields(record),
    }


def _endings(record: SampleRecord) -> dict[str, bool]:
    """Whether any of the record's generations hit the token cap (`truncated`) or ended while
    still thinking (`unclosed`), from its `generations` field; nothing when it has none."""
    generations: Any = record.get("generations")
    if not isinstance(generations, list):
        return {}
    ended = [g for repeats in generations for g in repeats or [] if isinstance(g, dict)]
    return {
        "truncated": any(g.get("finish_reason") == "length" for g in ended),
        "unclosed": any(g.get("thinking_closed") is False for g in ended),
    }


def _compressed(samples: list[dict[str, Any]]) -> str:
    # Strict JSON for the browser's JSON.parse: a value that is not finite is shown as null.
    plain = finite_only(samples)
    text = json.dumps(
        plain, ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False
    )
    # Level 6: a third of level 9's time at 100k samples, for a page a few percent larger.
    data = gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)
    return base64.b64encode(data).decode("ascii")


# ---------------------------------------------------------------------- per-task plots
def _figures(
    runs: Sequence[Run], report: CompareReport | None, samples: list[dict[str, Any]]
) -> dict[str, Any]:
    figures: dict[str, Any] = {"forest": forest_chart(report.comparisons) if report else None}
    primary = _primary_metrics(runs)
    labels = [run.label for run in runs]
    per_task: dict[str, list[dict[str, Any]]] = {}
    for entry in samples:
        key = primary.get(entry["task"])
        if key is not None and entry["filter"] == key[1]:
            per_task.setdefault(entry["task"], []).append(entry)
    figures["tasks"] = {
        task: task_charts(task, primary[task][0], entries, labels)
        for task, entries in per_task.items()
    }
    return figures


def task_charts(
    task: str, metric: str, entries: list[dict[str, Any]], labels: list[str]
) -> dict[str, Any]:
    """A task's charts (data the page draws as SVG): its primary metric's distribution, its
    mean by cluster (when the docs record one), and by prompt length, one series per run."""
    scores: dict[str, list[tuple[float, int, Any]]] = {label: [] for label in labels}
    for entry in entries:
        for label, view in zip(labels, entry["runs"]):
            value = None if view is None else _number(view["metrics"].get(metric))
            if value is not None:
                scores[label].append((value, _prompt_length(view), view.get("cluster")))
    out: dict[str, Any] = {}
    values = [v for rows in scores.values() for v, _, _ in rows]
    if not values:
        return out
    binary = all(v in (0.0, 1.0) for v in values)
    bins = [
        _histogram([v for v, _, _ in rows], binary, min(values), max(values))
        for rows in scores.values()
    ]
    out["distribution"] = {
        "kind": "bars",
        "title": f"{task}: {metric} per doc",
        "x_title": metric,
        "y_title": "docs",
        "categories": bins[0][0],
        "series": [{"name": label, "values": counts} for label, (_, counts) in zip(labels, bins)],
    }
    if any(c is not None for rows in scores.values() for _, _, c in rows):
        means = {
            label: _means_by([(str(c), v) for v, _, c in rows if c is not None])
            for label, rows in scores.items()
        }
        clusters = sorted({c for m in means.values() for c in m})
        out["by_cluster"] = {
            "kind": "bars",
            "title": f"{task}: mean {metric} by cluster",
            "x_title": "cluster",
            "y_title": metric,
            "categories": clusters,
            "series": [
                {"name": label, "values": [m.get(c) for c in clusters]}
                for label, m in means.items()
            ],
        }
    lengths = sorted(length for rows in scores.values() for _, length, _ in rows)
    edges = sorted(
        {
            lengths[min(len(lengths) - 1, i * len(lengths) // LENGTH_BINS)]
            for i in range(LENGTH_BINS)
        }
    )
    series = []
    for label, rows in scores.items():
        means_by_bin = _means_by([(_bin_of(length, edges), v) for v, length, _ in rows])
        points = sorted(means_by_bin.items(), key=lambda kv: kv[0])
        series.append({"name": label, "points": [[edge, mean] for edge, mean in points]})
    out["by_length"] = {
        "kind": "lines",
        "title": f"{task}: mean {metric} by prompt length",
        "x_title": "prompt length (characters, bins from)",
        "y_title": metric,
        "series": series,
    }
    return out


def _histogram(
    values: list[float], binary: bool, low: float, high: float
) -> tuple[list[Any], list[int]]:
    if binary:
        return ["0", "1"], [values.count(0.0), values.count(1.0)]
    import numpy as np

    counts, edges = np.histogram(
        values, bins=SCORE_BINS, range=(low, high if high > low else low + 1)
    )
    return [f"{e:.3g}" for e in edges[:-1]], [int(c) for c in counts]


def _means_by(pairs: list[tuple[Any, float]]) -> dict[Any, float]:
    sums: dict[Any, list[float]] = {}
    for key, value in pairs:
        sums.setdefault(key, []).append(value)
    return {key: sum(v) / len(v) for key, v in sorted(sums.items(), key=lambda kv: str(kv[0]))}


def _bin_of(length: int, edges: list[int]) -> int:
    """The largest bin edge at or below `length`."""
    return max((edge for edge in edges if edge <= length), default=edges[0])


def _prompt_length(view: dict[str, Any]) -> int:
    first: Any = next(iter(view["arguments"].values()), {})
    prompt = first.get("arg_0", "") if isinstance(first, dict) else ""
    return len(prompt) if isinstance(prompt, str) else len(json.dumps(prompt))


# ---------------------------------------------------------------------- helpers
def _script_json(value: Any) -> str:
    """JSON safe to inline in a <script> element."""
    text = json.dumps(value, ensure_ascii=False, default=str, allow_nan=False)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def _float(value: Any) -> Any:
    """lm-eval writes the run's total time as a string."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _finite(*values: float | None) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
