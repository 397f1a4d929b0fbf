"""Judge metrics: the prompts they send the judge model and how they read its verdicts.

The default prompts follow the judge prompts published with MT-Bench (Zheng et al., 2023,
"Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena", FastChat's `judge_prompts.jsonl`):
single-answer grading on a 1-10 scale with the score written as ``[[N]]``, pairwise comparison
with the verdict written as ``[[A]]``, ``[[B]]`` or ``[[C]]`` (tie), and reference-guided
grading. The wording is assay's own. Each metric takes a ``template`` option: the path of a
text file (``string.Template`` syntax) that replaces the default prompt, and a
``judge_repeats`` option (default 1): with K > 1 each answer is judged K times with sampled,
seeded decoding and its value is the mean of the K parsed scores.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any, Literal

from assay.doc import OutputType
from assay.errors import ConfigError, DataError
from assay.metrics._options import reject_unknown
from assay.metrics.base import Metric, SampleInput, register_metric

Kind = Literal["score", "pairwise", "correct"]

SCORE_PATTERN = re.compile(r"\[\[(\d+(?:\.\d+)?)\]\]")
"""judge_score's verdict: the last ``[[N]]`` in the judge's answer, N from 1 to 10."""
PAIRWISE_PATTERN = re.compile(r"\[\[([ABC])\]\]")
"""judge_pairwise's verdict: the last ``[[A]]``, ``[[B]]`` or ``[[C]]`` (tie)."""
CORRECT_PATTERN = re.compile(r"\[\[(YES|NO)\]\]", re.IGNORECASE)
"""judge_correct's verdict: the last ``[[YES]]`` or ``[[NO]]``."""

_DEFAULT_TEMPLATES: dict[Kind, str] = {
    "score": "single.txt",
    "pairwise": "pairwise.txt",
    "correct": "correct.txt",
}
_FIELDS: dict[Kind, set[str]] = {
    "score": {"question", "answer"},
    "pairwise": {"question", "answer_a", "answer_b"},
    "correct": {"question", "answer", "reference"},
}
_OUTCOME = {"A": 1.0, "C": 0.5, "B": 0.0}
"""Pairwise points of the answer shown as A."""


@dataclass(frozen=True)
class Judgement:
    """What the judge said about one answer: every prompt sent, every raw verdict, the parsed
    score (NaN when a verdict could not be parsed) and why it could not."""

    prompts: list[str]
    verdicts: list[str]
    """The raw verdicts, repeat by repeat (each repeat answers every prompt, in order)."""
    score: float
    error: str | None = None
    repeat_scores: list[float] = field(default_factory=list)
    """With judge_repeats > 1: each repeat's parsed score (NaN when unparseable)."""

    def record(self) -> dict[str, Any]:
        """The samples-file form (under the record's ``judge`` key)."""
        out: dict[str, Any] = {
            "prompts": self.prompts,
            "verdicts": self.verdicts,
            "score": None if math.isnan(self.score) else self.score,
        }
        if self.error is not None:
            out["error"] = self.error
        if len(self.repeat_scores) > 1:
            out["repeat_scores"] = [None if math.isnan(v) else v for v in self.repeat_scores]
        return out


@dataclass(frozen=True)
class Grader:
    """One judge metric's prompts and verdict parsing."""

    kind: Kind
    template: Template
    repeats: int = 1
    """Judgements per answer (judge_repeats)."""

    def prompts(self, question: str, answer: str, reference: str | None) -> list[str]:
        """The judge prompts for one answer: one, or two for pairwise (the model's answer as A,
        then as B, so a judge's preference for a position cancels out)."""
        if self.kind == "score":
            return [self.template.substitute(question=question, answer=answer)]
        if reference is None:
            raise DataError(
                f"judge_{self.kind} needs a reference answer, and this doc has none (give the "
                "task a doc_to_target)."
            )
        if self.kind == "correct":
            return [self.template.substitute(question=question, answer=answer, reference=reference)]
        return [
            self.template.substitute(question=question, answer_a=answer, answer_b=reference),
            self.template.substitute(question=question, answer_a=reference, answer_b=answer),
        ]

    def score(self, verdicts: list[str]) -> tuple[float, str | None]:
        """The score the verdicts give, or NaN and the reason when one cannot be parsed.

        judge_score: N in [1, 10]. judge_correct: 1 for YES, 0 for NO. judge_pairwise: the mean
        over both orders of the model's points (win 1, tie 0.5, loss 0), so a judge that always
        picks the same position gives a tie (Arena-Hard's two-game average)."""
        if self.kind == "score":
            found = _last(SCORE_PATTERN, verdicts[0])
            if found is None:
                return math.nan, "no [[N]] score in the verdict"
            value = float(found)
            if not 1 <= value <= 10:
                return math.nan, f"score [[{found}]] is outside 1-10"
            return value, None
        if self.kind == "correct":
            found = _last(CORRECT_PATTERN, verdicts[0])
            if found is None:
                return math.nan, "no [[YES]] or [[NO]] in the verdict"
            return (1.0 if found.upper() == "YES" else 0.0), None
        first, second = (_last(PAIRWISE_PATTERN, v) for v in verdicts)
        if first is None or second is None:
            order = "model first" if first is None else "reference first"
            return math.nan, f"no [[A]], [[B]] or [[C]] in the verdict ({order})"
        return (_OUTCOME[first] + (1.0 - _OUTCOME[second])) / 2, None


def _last(pattern: re.Pattern[str], text: str) -> str | None:
    found = pattern.findall(text)
    return found[-1] if found else None


@dataclass(frozen=True, slots=True)
class JudgeMetric(Metric):
    """A metric whose per-sample value is a judge model's verdict (read from the judge stage)."""

    grader: Grader | None = field(default=None)


def judge_metrics(metrics: list[Any]) -> list[JudgeMetric]:
    """The judge metrics among a task's metrics (ScoredMetric or Metric objects)."""
    found = [getattr(m, "metric", m) for m in metrics]
    return [m for m in found if isinstance(m, JudgeMetric)]


def _grader(name: str, kind: Kind, template: Any) -> Grader:
    if template is None:
        text = (resources.files(__package__) / "templates" / _DEFAULT_TEMPLATES[kind]).read_text(
            encoding="utf-8"
        )
    else:
        try:
            text = Path(str(template)).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"metric {name!r}: template {template!r} cannot be read ({exc.strerror}); give "
                "the path of a prompt text file"
            ) from None
    compiled = Template(text)
    used = {m.group("named") or m.group("braced") for m in compiled.pattern.finditer(text)}
    missing = _FIELDS[kind] - used
    unknown = used - _FIELDS[kind] - {None}
    if missing or unknown:
        raise ConfigError(
            f"metric {name!r}: template {template!r} must use "
            f"{', '.join('$' + f for f in sorted(_FIELDS[kind]))}"
            + (f"; it lacks {', '.join('$' + f for f in sorted(missing))}" if missing else "")
            + (
                f"; it has unknown {', '.join('$' + str(f) for f in sorted(unknown))}"
                if unknown
                else ""
            )
        )
    return Grader(kind, compiled)


def _judge_metric(name: str, kind: Kind, options: dict[str, Any], higher: bool = True) -> Metric:
    template = options.pop("template", None)
    repeats = options.pop("judge_repeats", 1)
    reject_unknown(name, options, ["template", "judge_repeats"])
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ConfigError(
            f"metric {name!r}: judge_repeats must be a whole number >= 1, got {repeats!r}"
        )
    grader = replace(_grader(name, kind, template), repeats=repeats)

    def verdict_of(sample: SampleInput) -> float:
        judged = sample.judgements or {}
        if name not in judged:
            raise DataError(
                f"metric {name!r} is graded by a judge model: pass --judge-model (and "
                "--judge-model-args) to the run"
            )
        return judged[name].score

    kwargs: dict[str, Any] = {"template": template} if template is not None else {}
    if repeats > 1:
        kwargs["judge_repeats"] = repeats
    return JudgeMetric(
        name,
        verdict_of,
        "nanmean",
        higher,
        frozenset({OutputType.GENERATE_UNTIL}),
        kwargs,
        grader=grader,
    )


@register_metric("judge_score")
def judge_score(**options: Any) -> Metric:
    """MT-Bench single-answer grading: the judge scores the answer from 1 to 10 (verdict
    ``[[N]]``, see SCORE_PATTERN); the task's number is the mean over parsed verdicts."""
    return _judge_metric("judge_score", "score", options)


@register_metric("judge_pairwise")
def judge_pairwise(**options: Any) -> Metric:
    """Win rate against the doc's reference answer (AlpacaEval / Arena-Hard style): the judge
    compares both orders, win 1, tie 0.5, loss 0, averaged over the two orders."""
    return _judge_metric("judge_pairwise", "pairwise", options)


@register_metric("judge_correct")
def judge_correct(**options: Any) -> Metric:
    """Reference-guided correctness (MT-Bench's reference-guided grading, as yes/no): 1 when
    the judge says ``[[YES]]``, 0 for ``[[NO]]``."""
    return _judge_metric("judge_correct", "correct", options)
