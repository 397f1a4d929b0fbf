"""Pairing the docs of one task between two runs for `assay compare`: by doc id once the doc
hashes agree, refusing (or flagging) prompts that differ, with what explains them, and each
doc's cluster label."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from assay.errors import ResultsError
from assay.results.compare_report import CompareOptions, PairSummary
from assay.results.readers import Run, TaskSamples
from assay.results.schema import SampleRecord, docs_fingerprint


@dataclass
class TaskPairing:
    """The docs of one task paired between two runs."""

    task: str
    doc_ids: list[int]
    clusters: list[Hashable] | None


def pair_docs(
    a: Run,
    b: Run,
    task: str,
    sa: TaskSamples,
    sb: TaskSamples,
    options: CompareOptions,
    summary: PairSummary,
) -> TaskPairing:
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
    return TaskPairing(task, shared, cluster_labels(a, b, task, docs_a, shared, options))


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


def cluster_labels(
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
