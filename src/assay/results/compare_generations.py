"""`assay compare`: how two runs' generations ended, side by side, per task.

A metric difference between two runs can come from the token cap rather than the models: one
run truncating more generations (or leaving more thinking unclosed) scores lower for that
reason alone. For each task both runs ran, the truncated and unclosed-thinking rates of each
(results.json `assay.generations`) are set side by side, and the truncation rates are tested
for a difference larger than their noise by Fisher's exact test (two-sided, each run's
generations taken as independent draws), flagged at p < 0.05. The test is exact at any count;
it is not adjusted for the number of tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from assay.results.readers import Run

TRUNCATION_TEST = "Fisher's exact test (two-sided)"
TRUNCATION_ALPHA = 0.05


@dataclass(frozen=True)
class EndingCounts:
    """One run's generations of one task: how many, and how they ended."""

    generations: int
    finish_known: int | None
    """Generations whose finish reason is known: the truncated rate's denominator (None when
    the results file does not say)."""
    truncated: int
    unclosed: int

    @property
    def truncated_rate(self) -> float | None:
        """Truncated over the generations whose finish reason is known; None when none is."""
        return self.truncated / self.finish_known if self.finish_known else None

    @property
    def unclosed_rate(self) -> float | None:
        """Unclosed thinking over all generations; None without generations."""
        return self.unclosed / self.generations if self.generations else None

    def as_json(self) -> dict[str, Any]:
        return {
            "generations": self.generations,
            "finish_reason_known": self.finish_known,
            "truncated": self.truncated,
            "truncated_rate": self.truncated_rate,
            "unclosed_thinking": self.unclosed,
            "unclosed_thinking_rate": self.unclosed_rate,
        }


@dataclass(frozen=True)
class EndingContrast:
    """One task's generation endings in runs a and b, and the test of their truncation."""

    task: str
    a: EndingCounts | None
    """None: run a reported nothing on how its generations ended."""
    b: EndingCounts | None
    p_value: float | None
    """Fisher's exact test of the truncation rates; None when it cannot be computed (see
    `untested`)."""
    untested: str | None = None
    """Why there is no p-value; None when there is one."""

    @property
    def truncation_differs(self) -> bool:
        """Whether the truncation rates differ by more than their noise (p < 0.05)."""
        return self.p_value is not None and self.p_value < TRUNCATION_ALPHA

    def as_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "a": self.a.as_json() if self.a else None,
            "b": self.b.as_json() if self.b else None,
            "truncation_test": TRUNCATION_TEST,
            "truncation_p_value": self.p_value,
            "truncation_differs": self.truncation_differs,
            **({"untested": self.untested} if self.untested else {}),
        }


def ending_contrasts(a: Run, b: Run, tasks: Sequence[str]) -> list[EndingContrast]:
    """A contrast per task of `tasks` that either run reported generation endings for."""
    out = []
    for task in tasks:
        counts_a, counts_b = ending_counts(a, task), ending_counts(b, task)
        if counts_a is None and counts_b is None:
            continue
        out.append(_contrast(task, counts_a, counts_b))
    return out


def ending_counts(run: Run, task: str) -> EndingCounts | None:
    """A run's `assay.generations` entry for `task` as counts; None without one."""
    assay = run.results.get("assay")
    entries = assay.get("generations") if isinstance(assay, dict) else None
    entry = entries.get(task) if isinstance(entries, dict) else None
    if not isinstance(entry, dict):
        return None
    truncated = int(entry.get("truncated") or 0)
    known = entry.get("finish_reason_known")
    rate = entry.get("truncated_rate")
    if known is None and rate:  # written before the denominator was: it follows from the rate
        known = round(truncated / rate)
    elif known is None and rate is None:
        known = 0
    return EndingCounts(
        generations=int(entry.get("generations") or 0),
        finish_known=None if known is None else int(known),
        truncated=truncated,
        unclosed=int(entry.get("unclosed_thinking") or 0),
    )


def _contrast(task: str, a: EndingCounts | None, b: EndingCounts | None) -> EndingContrast:
    if a is None or b is None:
        return EndingContrast(task, a, b, None, "only one run reported how its generations ended")
    if not a.finish_known or not b.finish_known:
        return EndingContrast(
            task, a, b, None, "a run reported no finish reason (or not how many it knew)"
        )
    from scipy.stats import fisher_exact

    table = [
        [a.truncated, a.finish_known - a.truncated],
        [b.truncated, b.finish_known - b.truncated],
    ]
    p_value = float(fisher_exact(table, alternative="two-sided").pvalue)
    return EndingContrast(task, a, b, min(p_value, 1.0))


def ending_lines(contrasts: Sequence[EndingContrast], a: str, b: str) -> list[str]:
    """The notes' lines: the rates side by side, then a flag per task whose truncation
    differs."""
    if not contrasts:
        return []
    lines = [f"  generations ({a} | {b}):"]
    for c in contrasts:
        lines.append(
            f"    {c.task}: truncated {_truncated(c.a)} | {_truncated(c.b)}; "
            f"unclosed thinking {_unclosed(c.a)} | {_unclosed(c.b)}"
        )
    for c in contrasts:
        if c.truncation_differs:
            assert c.a is not None and c.b is not None and c.p_value is not None
            lines.append(
                f"  TRUNCATION DIFFERS in {c.task}: {c.a.truncated}/{c.a.finish_known} vs "
                f"{c.b.truncated}/{c.b.finish_known} generations hit the token cap, "
                f"{TRUNCATION_TEST} p = {_p(c.p_value)} < {TRUNCATION_ALPHA:g} (not adjusted "
                "for the number of tasks): part of the metric difference may be the token cap, "
                "not the models"
            )
        elif c.untested:
            lines.append(f"  truncation in {c.task} not tested: {c.untested}")
    return lines


def _truncated(counts: EndingCounts | None) -> str:
    if counts is None:
        return "not reported"
    return _share(counts.truncated, counts.finish_known)


def _unclosed(counts: EndingCounts | None) -> str:
    if counts is None:
        return "not reported"
    return _share(counts.unclosed, counts.generations)


def _share(count: int, total: int | None) -> str:
    return f"{count / total:.1%} ({count}/{total})" if total else "unknown"


def _p(value: float) -> str:
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"
