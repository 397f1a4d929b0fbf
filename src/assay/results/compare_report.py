"""What `assay compare` reports: its options, one row per comparison, what was paired between
two runs, and the `--json` document (strict JSON: non-finite numbers as null, with a note)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from assay.results.compare_generations import EndingContrast


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
