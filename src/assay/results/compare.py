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

import hashlib
import json
import math
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from assay.errors import ResultsError
from assay.results.compare_generations import EndingContrast, ending_contrasts
from assay.results.readers import Run, TaskSamples
from assay.results.schema import SampleRecord, docs_fingerprint, metric_columns, metric_key
from assay.stats.multiplicity import holm
from assay.stats.paired import PairedResult, combine_unweighted, paired_bootstrap, paired_mean


@dataclass(frozen=True)
class CompareOptions:
    """How runs are compared (the `assay compare` flags)."""

    confidence: float = 0.95
    """Confidence level of the intervals; rows are significant when p_value_holm < 1 - it."""
    cluster_by: dict[str, str] = field(default_factory=dict)
    """Doc field to cluster by, per task; the key "*" applies to every task. Tasks not named
    use the cluster key their run recorded (none: docs independent)."""
    allow_prompt_mismatch: bool = False
    """Compare docs whose prompts differ (flagged) instead of refusing."""
    bootstrap_iters: int = 1000
    """Replicates of the paired bootstrap (corpus-level metrics)."""
    seed: int = 1234
    """Seed of the paired bootstrap."""


@dataclass
class Comparison:
    """One row: run b against run a on one (task or group, metric, filter). The fields are
    those of `--json` (None where a statistic does not apply)."""

    task: str
    metric: str
    filter: str
    a: str
    b: str
    n: int
    mean_a: float | None
    mean_b: float | None
    diff: float | None
    stderr: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    p_value: float | None
    p_value_holm: float | None
    mcnemar_p: float | None
    mde: float | None
    clusters: int | None
    method: str
    note: str | None = None
    """Why a statistic is null, or which conservative substitute stands in for it (the
    interval, the MDE); None (and absent from `--json`) when every statistic was estimated."""
    test: str = "normal"
    """The test p_value (and so `*`) comes from: normal, t(Bell-McCaffrey) CR2, McNemar exact,
    sign-flip exact, exact sign test, bootstrap, or none."""

    def significant(self) -> bool:
        """Whether the Holm-adjusted p-value is below 1 - confidence."""
        return self.p_value_holm is not None and self.p_value_holm < 1 - self.confidence


@dataclass
class PairSummary:
    """What was paired between two runs, and what differs between them."""

    a: str
    b: str
    paired_docs: dict[str, int]
    """Per task: docs present in both runs (the ones compared)."""
    unpaired_docs: dict[str, tuple[int, int]]
    """Per task with docs in one run only: (only in a, only in b)."""
    prompt_mismatches: dict[str, tuple[int, int]]
    """Per task compared despite differing prompts: (docs whose prompts differ, first doc)."""
    differs: list[tuple[str, Any, Any]]
    """Provenance entries whose values differ: (key, value in a, value in b)."""
    only_in_one: list[str] = field(default_factory=list)
    """Tasks run by only one of the two."""
    skipped: list[str] = field(default_factory=list)
    """Metrics not compared, with the reason."""
    generations: list[EndingContrast] = field(default_factory=list)
    """Per task either run said how its generations ended: the truncated and unclosed
    thinking rates of both, and whether the truncation rates differ (compare_generations)."""
    prompt_causes: dict[str, str] = field(default_factory=dict)
    """Per task in `prompt_mismatches`: what the runs recorded that explains it."""


@dataclass
class CompareReport:
    """Everything `assay compare` prints or writes."""

    comparisons: list[Comparison]
    pairs: list[PairSummary]
    confidence: float
    api_usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per run label, its API requests, tokens and cost (results.json `assay.api_usage`), for
    the runs that recorded any."""

    def as_json(self) -> dict[str, Any]:
        """The `--json` document."""
        return {
            "comparisons": [_json_row(c) for c in self.comparisons],
            "pairs": [
                {
                    "a": p.a,
                    "b": p.b,
                    "paired_docs": p.paired_docs,
                    "unpaired_docs": {t: list(v) for t, v in p.unpaired_docs.items()},
                    "prompt_mismatches": {
                        t: {"docs": n, "first_doc": first, "cause": p.prompt_causes.get(t)}
                        for t, (n, first) in p.prompt_mismatches.items()
                    },
                    "differs": [{"key": k, "a": va, "b": vb} for k, va, vb in p.differs],
                    "tasks_in_one_run": p.only_in_one,
                    "skipped": p.skipped,
                    **(
                        {"generations": [c.as_json() for c in p.generations]}
                        if p.generations
                        else {}
                    ),
                }
                for p in self.pairs
            ],
            **({"api_usage": self.api_usage} if self.api_usage else {}),
        }


def _json_row(comparison: Comparison) -> dict[str, Any]:
    """One comparison as JSON: `note` only where there is one, so rows whose statistics were
    all estimated read as they always have."""
    row = _finite(asdict(comparison))
    if row["note"] is None:
        del row["note"]
    return row


def _finite(row: dict[str, Any]) -> dict[str, Any]:
    """NaN (undefined statistics) and ±inf as null: strict JSON has neither. A value that is
    infinite, not merely undefined, is named in the row's note."""
    infinite = [k for k, v in row.items() if isinstance(v, float) and math.isinf(v)]
    cleaned = {
        k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()
    }
    if infinite:
        said = f"{', '.join(f'{k} is {row[k]:g}' for k in infinite)} (null here)"
        cleaned["note"] = said if not row.get("note") else f"{row['note']}; {said}"
    return cleaned


# ---------------------------------------------------------------------- pairs of runs
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


@dataclass
class _TaskPairing:
    """The docs of one task paired between two runs."""

    task: str
    doc_ids: list[int]
    clusters: list[Hashable] | None


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
    pairings: dict[str, _TaskPairing] = {}
    for task in tasks:
        sa, sb = a.samples(task), b.samples(task)
        pairing = _pair_docs(a, b, task, sa, sb, options, summary)
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
                row = _compare_metric(a, b, task, metric, flt, va, vb, pairing, options, summary)
                if row is not None:
                    rows.append(row)
    rows += _compare_groups(a, b, per_doc, pairings, options, summary)
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


# ---------------------------------------------------------------------- docs
def _pair_docs(
    a: Run,
    b: Run,
    task: str,
    sa: TaskSamples,
    sb: TaskSamples,
    options: CompareOptions,
    summary: PairSummary,
) -> _TaskPairing:
    docs_a, docs_b = sa.docs(), sb.docs()
    shared = sorted(set(docs_a) & set(docs_b))
    only_a, only_b = len(docs_a) - len(shared), len(docs_b) - len(shared)
    if only_a or only_b:
        summary.unpaired_docs[task] = (only_a, only_b)
    if not shared:
        raise ResultsError(
            f"task {task!r}: runs {a.label} and {b.label} have no doc id in common "
            f"({len(docs_a)} and {len(docs_b)} docs). Compare runs over the same docs."
        )
    differing = [i for i in shared if docs_a[i]["doc_hash"] != docs_b[i]["doc_hash"]]
    if differing:
        first = differing[0]
        fingerprint_a = docs_fingerprint((i, docs_a[i]["doc_hash"]) for i in shared)
        fingerprint_b = docs_fingerprint((i, docs_b[i]["doc_hash"]) for i in shared)
        raise ResultsError(
            f"task {task!r}: runs {a.label} and {b.label} evaluated different data: the dataset "
            f"fingerprints of their {len(shared)} shared doc ids differ ({fingerprint_a[:12]} "
            f"vs {fingerprint_b[:12]}); {len(differing)} doc(s) differ, the first is doc {first} "
            f"(a: {_short(docs_a[first].get('doc'))}; b: {_short(docs_b[first].get('doc'))}). "
            "Pairing them would compare different questions: compare runs of the same dataset "
            "revision and processing."
        )
    mismatched = [i for i in shared if _prompt_of(docs_a[i]) != _prompt_of(docs_b[i])]
    if mismatched:
        first = mismatched[0]
        cause = prompt_cause(a, b, task, mismatched)
        if not options.allow_prompt_mismatch:
            raise ResultsError(
                f"task {task!r}: runs {a.label} and {b.label} sent different prompts for "
                f"{len(mismatched)} of {len(shared)} paired docs; the first is doc {first} "
                f"(a: {_short(_first_prompt(docs_a[first]))}; b: "
                f"{_short(_first_prompt(docs_b[first]))}). Cause: {cause}. The difference then "
                "measures the prompts as well as the models. Pass --allow-prompt-mismatch to "
                "compare anyway (the comparison is flagged)."
            )
        summary.prompt_mismatches[task] = (len(mismatched), first)
        summary.prompt_causes[task] = cause
    return _TaskPairing(task, shared, _clusters(a, b, task, docs_a, shared, options))


_PROMPT_FACTS = (
    "settings.num_fewshot", "settings.apply_chat_template", "settings.system_instruction",
    "settings.fewshot_as_multiturn", "settings.fewshot_keep_self", "settings.gen_kwargs",
    "seeds.fewshot_seed", "backend.chat_template_sha256",
)  # fmt: skip
"""What the runs record that changes the prompts of the same docs."""


def prompt_cause(a: Run, b: Run, task: str, mismatched: Sequence[int]) -> str:
    """What explains that `a` and `b` sent different prompts for the `mismatched` docs of
    `task`: the few-shot rule where assay's prompts differ from lm-eval's, and the recorded
    settings that change prompts; said plainly when nothing recorded explains it."""
    causes = []
    for run in (a, b):
        recorded: dict[str, Any] = dict(run.results.get("provenance") or {})
        entry = (recorded.get("tasks") or {}).get(task) or {}
        replaced = set(entry.get("fewshot_replaced_self") or ())
        hit = [i for i in mismatched if i in replaced]
        if hit:
            shown = ", ".join(map(str, hit[:8])) + (" ..." if len(hit) > 8 else "")
            causes.append(
                f"in {len(hit)} of the {len(mismatched)} docs (docs {shown}), run {run.label} "
                "replaced a doc drawn as its own few-shot example, which lm-eval keeps (re-run "
                "it with --fewshot-keep-self for lm-eval's prompts)"
            )
    facts_a, facts_b = a.facts(), b.facts()
    keys = [*_PROMPT_FACTS, f"task.{task}.num_fewshot", f"task.{task}.task_hash"]
    for key in keys:
        if key in facts_a and key in facts_b and facts_a[key] != facts_b[key]:
            causes.append(f"{key} is {facts_a[key]!r} in {a.label}, {facts_b[key]!r} in {b.label}")
    if not causes:
        return (
            "nothing the runs recorded explains it (same few-shot count, seeds, chat template "
            "and system instruction): compare the first doc's prompts above"
        )
    return "; ".join(causes)


def _prompt_of(record: SampleRecord) -> tuple[str | None, str]:
    """What a doc asked the model: the prompt hash and the canonical request arguments."""
    arguments = json.dumps(record.get("arguments"), sort_keys=True, ensure_ascii=False)
    return record.get("prompt_hash"), hashlib.sha256(arguments.encode()).hexdigest()


def _first_prompt(record: SampleRecord) -> Any:
    first = (record.get("arguments") or {}).get("gen_args_0") or {}
    return first.get("arg_0", record.get("prompt_hash"))


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _clusters(
    a: Run,
    b: Run,
    task: str,
    docs: dict[int, SampleRecord],
    shared: list[int],
    options: CompareOptions,
) -> list[Hashable] | None:
    """Cluster label of every paired doc, or None when the docs are independent."""
    chosen = options.cluster_by.get(task, options.cluster_by.get("*"))
    recorded = a.cluster_key(task) or b.cluster_key(task)
    key = chosen or recorded
    if key is None:
        return None
    labels: list[Hashable] = []
    for i in shared:
        record = docs[i]
        doc = record.get("doc") or {}
        if chosen is None and "cluster" in record:
            labels.append(_hashable(record["cluster"]))
        elif isinstance(doc, dict) and key in doc:
            labels.append(_hashable(doc[key]))
        else:
            fields = sorted(doc) if isinstance(doc, dict) else []
            source = (
                "--cluster-by" if chosen else f"the task's cluster key (run {a.label}/{b.label})"
            )
            raise ResultsError(
                f"task {task!r}: {source} names the doc field {key!r}, but doc {i} has no such "
                f"field (its fields: {fields}). Give a field every doc has, e.g. "
                f"--cluster-by {task}=FIELD."
            )
    return labels


def _hashable(value: Any) -> Hashable:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else value


# ---------------------------------------------------------------------- metrics
def _aggregation_name(run: Run, task: str, metric: str) -> str | None:
    """The aggregation a task uses for a metric: as its config says, else the registered
    metric's own; None when unknown."""
    for spec in run.config(task).get("metric_list") or []:
        if isinstance(spec, dict) and spec.get("metric") == metric:
            given = spec.get("aggregation")
            if given is not None:
                return _registered_aggregation(given)
    from assay.metrics.base import get_metric

    try:
        return get_metric(metric).aggregation
    except Exception:  # unknown or needing arguments: no aggregation known
        return None


def _registered_aggregation(given: Any) -> str | None:
    """The registered aggregation a config's `aggregation` names: a registered name, or the
    dotted path of a registered aggregation's function (how results record a Python task's
    callable); None for anything else (a task's own function cannot be recomputed here)."""
    from importlib import import_module

    from assay.metrics.base import AGGREGATIONS

    if not isinstance(given, str) or given.startswith("!function"):
        return None
    if given in AGGREGATIONS:
        return given
    module, _, name = given.rpartition(".")
    if not module.startswith("assay."):
        return None  # a results file never makes compare import code outside assay
    try:
        function = getattr(import_module(module), name) if module else None
    except (ImportError, AttributeError, ValueError):
        return None
    return next((a for a in AGGREGATIONS if AGGREGATIONS.get(a).fn is function), None)


def _compare_metric(
    a: Run,
    b: Run,
    task: str,
    metric: str,
    flt: str,
    va: list[Any],
    vb: list[Any],
    pairing: _TaskPairing,
    options: CompareOptions,
    summary: PairSummary,
) -> Comparison | None:
    from assay.metrics.base import AGGREGATIONS

    name = _aggregation_name(a, task, metric)
    if name is not None and name != _aggregation_name(b, task, metric):
        summary.skipped.append(
            f"{task} {metric},{flt}: the runs aggregate it differently "
            f"({name} vs {_aggregation_name(b, task, metric)})"
        )
        return None
    if name is None or name not in AGGREGATIONS or name == "bypass":
        what = f"aggregation {name}" if name else "its aggregation (the task's own, or unknown)"
        summary.skipped.append(f"{task} {metric},{flt}: {what} cannot be recomputed here")
        return None
    aggregation = AGGREGATIONS.get(name)
    if name in ("nanmean", "judge_mean", "clipped_nanmean"):
        va, vb, pairing = _both_valued(va, vb, pairing, f"{task} {metric},{flt}", summary)
        if not va:
            return None
    if aggregation.stderr in ("mean", "nan_mean"):
        # NaN is a number here (a metric that does not skip NaN): paired_mean says n/a for it.
        if not all(isinstance(v, int | float) for v in (*va, *vb)):
            summary.skipped.append(f"{task} {metric},{flt}: per-doc values are not numbers")
            return None
        result = paired_mean(
            [float(v) for v in va],
            [float(v) for v in vb],
            clusters=pairing.clusters,
            confidence=options.confidence,
        )
    else:
        result = paired_bootstrap(
            va,
            vb,
            aggregation.fn,
            clusters=pairing.clusters,
            confidence=options.confidence,
            iters=options.bootstrap_iters,
            seed=options.seed,
        )
    return _row(task, metric, flt, a, b, result)


def _both_valued(
    va: list[Any], vb: list[Any], pairing: _TaskPairing, what: str, summary: PairSummary
) -> tuple[list[Any], list[Any], _TaskPairing]:
    """The docs valued in both runs of a NaN-skipping metric (NaN is no value, e.g. a judge's
    unparseable verdict): each run's number leaves its NaN docs out, so the paired difference
    is over the docs both runs valued; how many were left out goes to the summary."""
    kept = [
        i for i, (x, y) in enumerate(zip(va, vb, strict=True)) if _is_number(x) and _is_number(y)
    ]
    if len(kept) < len(va):
        summary.skipped.append(
            f"{what}: {len(va) - len(kept)} of {len(va)} doc(s) have no value in one run "
            f"({'none left to compare' if not kept else 'compared on the other ' + str(len(kept))})"
        )
    clusters = None if pairing.clusters is None else [pairing.clusters[i] for i in kept]
    return (
        [va[i] for i in kept],
        [vb[i] for i in kept],
        replace(pairing, doc_ids=[pairing.doc_ids[i] for i in kept], clusters=clusters),
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value))


def _row(task: str, metric: str, flt: str, a: Run, b: Run, result: PairedResult) -> Comparison:
    return Comparison(
        task=task,
        metric=metric,
        filter=flt,
        a=a.label,
        b=b.label,
        n=result.n,
        mean_a=result.mean_a,
        mean_b=result.mean_b,
        diff=result.diff,
        stderr=result.stderr,
        ci_low=result.ci_low,
        ci_high=result.ci_high,
        confidence=result.confidence,
        p_value=result.p_value,
        p_value_holm=None,
        mcnemar_p=result.mcnemar_p,
        mde=result.mde,
        clusters=result.clusters,
        method=result.method,
        note=result.note,
        test=result.test,
    )


# ---------------------------------------------------------------------- groups
def _compare_groups(
    a: Run,
    b: Run,
    per_doc: dict[str, dict[tuple[str, str], tuple[list[Any], list[Any]]]],
    pairings: dict[str, _TaskPairing],
    options: CompareOptions,
    summary: PairSummary,
) -> list[Comparison]:
    """Groups both runs aggregated: per (metric, filter) of the group, the leaf tasks' paired
    per-doc values pooled. A group weighted by size (as its recorded score shows) gets the
    comparison of the pooled docs; an unweighted one the mean of its tasks' differences with
    sqrt(Σ stderr²)/k."""
    rows = []
    for group in [g for g in a.groups() if g in set(b.groups())]:
        entry = a.entry(group) or {}
        leaves = [t for t in a.leaf_tasks(group) if t in per_doc]
        for metric, flt in metric_columns(entry):
            present = [t for t in leaves if (metric, flt) in per_doc[t]]
            if not present or len(present) != len(a.leaf_tasks(group)):
                if present:
                    summary.skipped.append(
                        f"{group} {metric},{flt}: only {len(present)} of its "
                        f"{len(a.leaf_tasks(group))} tasks are compared"
                    )
                continue
            if any(_aggregation_name(a, t, metric) != "mean" for t in present):
                summary.skipped.append(f"{group} {metric},{flt}: a task's metric is not a mean")
                continue
            if _weighted_by_size(a, group, metric, flt, present):
                va, vb, clusters = [], [], []
                clustered = any(pairings[t].clusters is not None for t in present)
                for t in present:
                    xs, ys = per_doc[t][(metric, flt)]
                    va += [float(x) for x in xs]
                    vb += [float(y) for y in ys]
                    labels = pairings[t].clusters or pairings[t].doc_ids
                    clusters += [(t, c) for c in labels]
                result = paired_mean(
                    va,
                    vb,
                    clusters=[str(c) for c in clusters] if clustered else None,
                    confidence=options.confidence,
                )
            else:
                parts = [
                    paired_mean(
                        [float(x) for x in per_doc[t][(metric, flt)][0]],
                        [float(y) for y in per_doc[t][(metric, flt)][1]],
                        clusters=pairings[t].clusters,
                        confidence=options.confidence,
                    )
                    for t in present
                ]
                result = combine_unweighted(parts, options.confidence)
            rows.append(_row(group, metric, flt, a, b, result))
    return rows


def _weighted_by_size(run: Run, group: str, metric: str, flt: str, tasks: list[str]) -> bool:
    """Whether the group's recorded score is the size-weighted mean of its tasks' scores (the
    default, and lm-eval's for mmlu) rather than their plain mean. lm-eval's results do not
    record the group's weight_by_size; the recorded numbers tell which was used."""
    key = metric_key(metric, flt)
    recorded = (run.entry(group) or {}).get(key)
    entries = [run.entry(t) or {} for t in tasks]
    values = [e.get(key) for e in entries]
    sizes = [e.get("sample_len", 0) for e in entries]
    numbers = [float(v) for v in values if isinstance(v, int | float)]
    if not isinstance(recorded, int | float) or len(numbers) != len(values):
        return True
    weighted = sum(v * n for v, n in zip(numbers, sizes)) / max(sum(sizes), 1)
    plain = sum(numbers) / len(numbers)
    return abs(recorded - weighted) <= abs(recorded - plain)


# ---------------------------------------------------------------------- provenance
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
