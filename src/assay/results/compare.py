"""`assay compare`: paired comparisons of runs, doc by doc.

For each pair of runs (a = earlier on the command line, or the baseline; b = the other) and each
task both ran, docs are paired by `doc_id` once their `doc_hash` agrees (the dataset rows are
the same) and their prompts agree (`prompt_hash` and the request arguments). Then, for every
(metric, filter) both runs scored, the per-doc values give one `Comparison`: a paired mean
comparison for metrics aggregated by mean, a paired bootstrap for corpus-level ones (f1, bleu,
perplexity...), see `assay.stats.paired`. Groups pool their leaf tasks' per-doc differences.
Holm's correction runs over every comparison of the invocation.

Refusals (a ResultsError naming the task and doc): docs whose hashes differ under the same id
(the datasets differ: their fingerprints over the shared docs differ), prompts that differ
(unless allowed, then flagged), a cluster field missing from a doc.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from assay.errors import ResultsError
from assay.results.compare_docs import TaskPairing, pair_docs, prompt_cause
from assay.results.compare_generations import ending_contrasts
from assay.results.compare_metrics import compare_groups, compare_metric
from assay.results.compare_report import CompareOptions, CompareReport, Comparison, PairSummary
from assay.results.readers import Run
from assay.results.schema import SampleRecord
from assay.stats.multiplicity import holm

__all__ = [
    "CompareOptions",
    "CompareReport",
    "Comparison",
    "PairSummary",
    "compare",
    "compare_runs",
    "prompt_cause",
    "read_runs",
    "run_pairs",
    "what_differs",
]


def compare(
    *paths: str | Path,
    baseline: str | Path | None = None,
    labels: Sequence[str] | None = None,
    options: CompareOptions | None = None,
) -> CompareReport:
    """Compare the runs at `paths` (assay or lm-eval output folders, or their results files):
    every pair in order, or each against `baseline` (one of the paths or labels, or another
    run, then listed first). `labels` name the runs in order (default: each path's basename).
    """
    from assay.results.readers import read_run

    runs = read_runs(paths, labels)
    chosen = None
    if baseline is not None:
        given = Path(baseline).resolve()
        chosen = next(
            (r for r in runs if r.label == str(baseline) or r.path.resolve() == given), None
        )
        if chosen is None:
            chosen = read_run(baseline)
            runs.insert(0, chosen)
    if len(runs) < 2:
        raise ResultsError("assay compare needs two runs or more (or one run and --baseline).")
    return compare_runs(runs, chosen, options)


def read_runs(paths: Sequence[str | Path], labels: Sequence[str] | None = None) -> list[Run]:
    """The runs at `paths`, named by `labels` in order (default: each path's basename)."""
    from assay.results.readers import read_run

    if labels is not None and len(labels) != len(paths):
        raise ResultsError(
            f"--labels {','.join(labels)!r}: {len(labels)} label(s) for {len(paths)} run(s); "
            "give one per RUN, in order."
        )
    return [read_run(p, labels[i] if labels else None) for i, p in enumerate(paths)]


def run_pairs(runs: Sequence[Run], baseline: Run | None = None) -> list[tuple[Run, Run]]:
    """Every pair in command-line order (a earlier), or each run against the baseline (the run
    with its label)."""
    if baseline is not None:
        return [(baseline, run) for run in runs if run.label != baseline.label]
    return [(runs[i], runs[j]) for i in range(len(runs)) for j in range(i + 1, len(runs))]


def compare_runs(
    runs: Sequence[Run], baseline: Run | None = None, options: CompareOptions | None = None
) -> CompareReport:
    """Compare every pair of runs (or each against `baseline`); see the module docstring."""
    options = options or CompareOptions()
    if len(runs) < 2:
        raise ResultsError("assay compare needs at least two runs.")
    labels = [run.label for run in runs]
    if len(set(labels)) != len(labels):
        raise ResultsError(
            f"runs are labelled {labels}: labels must differ. Name them with --labels a,b,..."
        )
    comparisons: list[Comparison] = []
    pairs = []
    for a, b in run_pairs(runs, baseline):
        rows, summary = _compare_pair(a, b, options)
        comparisons += rows
        pairs.append(summary)
    for row, adjusted in zip(comparisons, holm([_p(c) for c in comparisons])):
        row.p_value_holm = adjusted
    usage = {run.label: run.results["assay"]["api_usage"] for run in runs if _has_usage(run)}
    return CompareReport(comparisons, pairs, options.confidence, usage)


def _has_usage(run: Run) -> bool:
    return isinstance(run.results.get("assay"), dict) and "api_usage" in run.results["assay"]


def _p(row: Comparison) -> float | None:
    return None if row.p_value is None or math.isnan(row.p_value) else row.p_value


def _compare_pair(a: Run, b: Run, options: CompareOptions) -> tuple[list[Comparison], PairSummary]:
    tasks = [t for t in a.tasks() if t in set(b.tasks())]
    summary = PairSummary(a.label, b.label, {}, {}, {}, what_differs(a, b))
    summary.only_in_one = sorted(set(a.tasks()) ^ set(b.tasks()))
    if not tasks:
        raise ResultsError(
            f"runs {a.label} and {b.label} share no task (a ran {a.tasks()}, b ran "
            f"{b.tasks()}): nothing to compare."
        )
    rows: list[Comparison] = []
    per_doc: dict[str, dict[tuple[str, str], tuple[list[Any], list[Any]]]] = {}
    pairings: dict[str, TaskPairing] = {}
    for task in tasks:
        sa, sb = a.samples(task), b.samples(task)
        pairing = pair_docs(a, b, task, sa, sb, options, summary)
        pairings[task] = pairing
        summary.paired_docs[task] = len(pairing.doc_ids)
        per_doc[task] = {}
        for flt in [f for f in sa.by_filter if f in sb.by_filter]:
            docs_a, docs_b = sa.by_filter[flt], sb.by_filter[flt]
            first = docs_a[pairing.doc_ids[0]] if pairing.doc_ids else {}
            other = docs_b[pairing.doc_ids[0]] if pairing.doc_ids else {}
            for metric in [m for m in first.get("metrics", []) if m in other.get("metrics", [])]:
                va = [_value(docs_a[i], metric, task, a) for i in pairing.doc_ids]
                vb = [_value(docs_b[i], metric, task, b) for i in pairing.doc_ids]
                per_doc[task][(metric, flt)] = (va, vb)
                row = compare_metric(a, b, task, metric, flt, va, vb, pairing, options, summary)
                if row is not None:
                    rows.append(row)
    rows += compare_groups(a, b, per_doc, pairings, options, summary)
    summary.generations = ending_contrasts(a, b, tasks)
    return rows, summary


def _value(record: SampleRecord, metric: str, task: str, run: Run) -> Any:
    values: dict[str, Any] = record  # type: ignore[assignment]
    if metric not in values:
        raise ResultsError(
            f"run {run.label}, task {task!r}: doc {record.get('doc_id')} lists metric {metric!r} "
            "but holds no value for it. Is the samples file complete?"
        )
    return values[metric]


def what_differs(a: Run, b: Run) -> list[tuple[str, Any, Any]]:
    """Provenance entries (harness, model, settings, seeds, dataset fingerprints, chat
    template, versions) that both runs record with different values. An entry only one run
    records (lm-eval keeps no dataset revision, for instance) is not a known difference and is
    left out."""
    facts_a, facts_b = a.facts(), b.facts()
    return [
        (key, value, facts_b[key])
        for key, value in facts_a.items()
        if key in facts_b and facts_b[key] != value
    ]
