"""Judge metrics: the prompts they send the judge model and how they read its verdicts.

The default prompts follow the judge prompts published with MT-Bench (Zheng et al., 2023,
"Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena", FastChat's `judge_prompts.jsonl`):
single-answer grading on a 1-10 scale with the score written as ``[[N]]``, pairwise comparison
with the verdict written as ``[[A]]``, ``[[B]]`` or ``[[C]]`` (tie), and reference-guided
grading. The wording is assay's own. `judge_rubric` grades against a checklist of rubric items
as HealthBench does (Arora et al., 2025, "HealthBench: Evaluating Large Language Models Towards
Improved Human Health"; openai/simple-evals `healthbench_eval.py`). Each metric takes a
``template`` option: the path of a text file (``string.Template`` syntax) that replaces the
default prompt, and a ``judge_samples`` option (default 1): with K > 1 each answer is judged K
times with sampled, seeded decoding and its value is the mean of the K parsed scores.
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
from assay.requests.types import Messages

Kind = Literal["score", "pairwise", "correct", "rubric"]

Prompt = str | Messages
"""A judge prompt: plain text, or chat messages when it has a system prompt."""

SCORE_PATTERN = re.compile(r"\[\[(\d+(?:\.\d+)?)\]\]")
"""judge_score's verdict: the last ``[[N]]`` in the judge's answer, N from 1 to 10."""
PAIRWISE_PATTERN = re.compile(r"\[\[([ABC])\]\]")
"""judge_pairwise's verdict: the last ``[[A]]``, ``[[B]]`` or ``[[C]]`` (tie)."""
CORRECT_PATTERN = re.compile(r"\[\[(YES|NO)\]\]", re.IGNORECASE)
"""judge_correct's verdict: the last ``[[YES]]`` or ``[[NO]]``."""
RUBRIC_PATTERN = re.compile(r'"criteria_met"\s*:\s*(true|false)', re.IGNORECASE)
"""judge_rubric's verdict per rubric item: the last ``"criteria_met": true`` or ``false`` (the
JSON answer HealthBench's grader template asks for)."""

_DEFAULT_TEMPLATES: dict[Kind, str] = {
    "score": "single.txt",
    "pairwise": "pairwise.txt",
    "correct": "correct.txt",
    "rubric": "rubric.txt",
}
_FIELDS: dict[Kind, set[str]] = {
    "score": {"question", "answer"},
    "pairwise": {"question", "answer_a", "answer_b"},
    "correct": {"question", "answer", "reference"},
    "rubric": {"question", "answer", "rubric_item"},
}
OUTCOME_POINTS = {"A": 1.0, "C": 0.5, "B": 0.0}
"""Pairwise points of the answer shown as A."""


@dataclass(frozen=True)
class Judgement:
    """What the judge said about one answer: every prompt sent, every raw verdict, the parsed
    score (NaN when a verdict could not be parsed) and why it could not."""

    prompts: list[Prompt]
    verdicts: list[str]
    """The raw verdicts, sample by sample (each sample answers every prompt, in order)."""
    score: float
    error: str | None = None
    sample_scores: list[float] = field(default_factory=list)
    """Each sample's parsed score (NaN when unparseable), one per judge_samples."""
    labels: list[list[str | None]] = field(default_factory=list)
    """Per sample, the categorical verdict of each prompt (None when unparseable): what Cohen's
    kappa between two judges compares."""
    judge: str | None = None
    """Which judge said it, when the task has two ("1" or "2")."""
    second: Judgement | None = None
    """The second judge's Judgement of the same answer, when the task has two judges."""

    def record(self) -> dict[str, Any]:
        """The samples-file form (under the record's ``judge`` key)."""
        out: dict[str, Any] = {
            "prompts": self.prompts,
            "verdicts": self.verdicts,
            "score": None if math.isnan(self.score) else self.score,
        }
        if self.error is not None:
            out["error"] = self.error
        if len(self.sample_scores) > 1:
            out["sample_scores"] = [None if math.isnan(v) else v for v in self.sample_scores]
        if self.second is not None:
            out["second_judge"] = self.second.record()
        return out


@dataclass(frozen=True)
class RubricItem:
    """One item of a rubric checklist (HealthBench's ``rubrics`` entries)."""

    criterion: str
    points: float
    """Points when the criterion is met; negative for an undesirable behaviour."""

    def text(self) -> str:
        """As HealthBench's grader sees it: ``[points] criterion``."""
        points = int(self.points) if float(self.points).is_integer() else self.points
        return f"[{points}] {self.criterion}"


@dataclass(frozen=True)
class JudgeInput:
    """What a judge prompt is filled with for one answer."""

    question: str
    answer: str
    reference: str | None = None
    """The doc's reference answer (judge_pairwise, judge_correct)."""
    rubric: list[RubricItem] | None = None
    """The doc's rubric items (judge_rubric)."""
    history: list[tuple[str, str]] = field(default_factory=list)
    """Multi-turn docs: the earlier (user turn, answer) exchanges; `question` and `answer` are
    the last turn's."""
    references: list[str] | None = None
    """Per-turn reference answers (MT-Bench's reference-guided grading)."""


@dataclass(frozen=True)
class Grader:
    """One judge metric's prompts and verdict parsing."""

    kind: Kind
    template: Template | None
    """The prompt (None for graders that bring their benchmark's own prompts)."""
    samples: int = 1
    """Judgements per answer (judge_samples)."""
    rubric_field: str = "rubrics"
    """judge_rubric: the dataset field holding the rubric items."""
    max_gen_toks: int = 1024
    """Room the judge has for its verdict, explanation included (judge_max_gen_toks)."""

    def prompts(self, given: JudgeInput) -> list[Prompt]:
        """The judge prompts for one answer: one; two for pairwise (the model's answer as A,
        then as B, so a judge's preference for a position cancels out); one per rubric item."""
        question, answer, reference = given.question, given.answer, given.reference
        assert self.template is not None
        if self.kind == "score":
            return [self.template.substitute(question=question, answer=answer)]
        if self.kind == "rubric":
            if not given.rubric:
                raise DataError(
                    f"judge_rubric needs rubric items in the dataset field "
                    f"{self.rubric_field!r}, and this doc has none."
                )
            return [
                self.template.substitute(question=question, answer=answer, rubric_item=item.text())
                for item in given.rubric
            ]
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

    def labels(self, verdicts: list[str]) -> list[str | None]:
        """The categorical verdict of each prompt's answer (None when unparseable): the score
        ``N``, ``YES``/``NO``, ``A``/``B``/``C`` per order, or ``met``/``not met`` per item."""
        if self.kind == "score":
            return [_last(SCORE_PATTERN, verdicts[0])]
        if self.kind == "correct":
            found = _last(CORRECT_PATTERN, verdicts[0])
            return [found.upper() if found else None]
        if self.kind == "pairwise":
            return [_last(PAIRWISE_PATTERN, v) for v in verdicts]
        met = [_last(RUBRIC_PATTERN, v) for v in verdicts]
        return [None if m is None else ("met" if m.lower() == "true" else "not met") for m in met]

    def score(
        self, verdicts: list[str], rubric: list[RubricItem] | None = None
    ) -> tuple[float, str | None]:
        """The score the verdicts give, or NaN and the reason when one cannot be parsed.

        judge_score: N in [1, 10]. judge_correct: 1 for YES, 0 for NO. judge_pairwise: the mean
        over both orders of the model's points (win 1, tie 0.5, loss 0), so a judge that always
        picks the same position gives a tie (Arena-Hard's two-game average). judge_rubric:
        HealthBench's ``calculate_score``, the points of the items met (negative ones included)
        over the total of the positive points; it can be below 0, and the task's mean is clipped
        to [0, 1] (``clipped_nanmean``)."""
        labels = self.labels(verdicts)
        if self.kind == "score":
            if labels[0] is None:
                return math.nan, "no [[N]] score in the verdict"
            value = float(labels[0])
            if not 1 <= value <= 10:
                return math.nan, f"score [[{labels[0]}]] is outside 1-10"
            return value, None
        if self.kind == "correct":
            if labels[0] is None:
                return math.nan, "no [[YES]] or [[NO]] in the verdict"
            return (1.0 if labels[0] == "YES" else 0.0), None
        if self.kind == "rubric":
            return _rubric_score(rubric or [], labels)
        first, second = labels
        if first is None or second is None:
            order = "model first" if first is None else "reference first"
            return math.nan, f"no [[A]], [[B]] or [[C]] in the verdict ({order})"
        return (OUTCOME_POINTS[first] + (1.0 - OUTCOME_POINTS[second])) / 2, None


def _rubric_score(rubric: list[RubricItem], labels: list[str | None]) -> tuple[float, str | None]:
    missing = [i + 1 for i, label in enumerate(labels) if label is None]
    if missing:
        return math.nan, (
            f'no "criteria_met": true or false in the verdict on rubric item(s) '
            f"{', '.join(map(str, missing))}"
        )
    possible = sum(item.points for item in rubric if item.points > 0)
    if possible <= 0:
        return math.nan, "the rubric has no item with positive points"
    achieved = sum(
        item.points for item, label in zip(rubric, labels, strict=True) if label == "met"
    )
    return achieved / possible, None


def rubric_items(value: Any, field_name: str) -> list[RubricItem]:
    """A doc's rubric field as RubricItems; DataError naming what is wrong."""
    if not isinstance(value, list) or not value:
        raise DataError(
            f"judge_rubric: field {field_name!r} must be a non-empty list of "
            f'{{"criterion": text, "points": number}}, got {type(value).__name__}'
        )
    items = []
    for i, item in enumerate(value):
        criterion = item.get("criterion") if isinstance(item, dict) else None
        points = item.get("points") if isinstance(item, dict) else None
        if (
            not isinstance(criterion, str)
            or isinstance(points, bool)
            or not isinstance(points, int | float)
        ):
            raise DataError(
                f"judge_rubric: item {i} of field {field_name!r} must be "
                f'{{"criterion": text, "points": number}}, got {item!r}'
            )
        items.append(RubricItem(criterion, float(points)))
    return items


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


def judge_metric(
    name: str,
    kind: Kind,
    options: dict[str, Any],
    aggregation: str = "judge_mean",
    grader: Grader | None = None,
) -> Metric:
    """A registered judge metric's Metric: `grader` (or one built from the `template` option
    and `kind`) with the `judge_samples` option applied."""
    template = options.pop("template", None) if grader is None else None
    samples = options.pop("judge_samples", 1)
    base = grader if grader is not None else Grader(kind, None)
    max_gen_toks = options.pop("judge_max_gen_toks", base.max_gen_toks)
    accepted = ["judge_samples", "judge_max_gen_toks"] + (["template"] if grader is None else [])
    rubric_field = "rubrics"
    if kind == "rubric":
        rubric_field = options.pop("rubric_field", rubric_field)
        accepted.append("rubric_field")
        if not isinstance(rubric_field, str) or not rubric_field:
            raise ConfigError(
                f"metric {name!r}: rubric_field must name a dataset field, got {rubric_field!r}"
            )
    reject_unknown(name, options, accepted)
    for option, value in (("judge_samples", samples), ("judge_max_gen_toks", max_gen_toks)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(
                f"metric {name!r}: {option} must be a whole number >= 1, got {value!r}"
            )
    built = grader if grader is not None else _grader(name, kind, template)
    built = replace(built, samples=samples, rubric_field=rubric_field, max_gen_toks=max_gen_toks)

    def verdict_of(sample: SampleInput) -> float:
        judged = sample.judgements or {}
        if name not in judged:
            raise DataError(
                f"metric {name!r} is graded by a judge model: pass --judge-model (and "
                "--judge-model-args) to the run"
            )
        return judged[name].score

    kwargs: dict[str, Any] = {"template": template} if template is not None else {}
    if samples > 1:
        kwargs["judge_samples"] = samples
    if max_gen_toks != base.max_gen_toks:
        kwargs["judge_max_gen_toks"] = max_gen_toks
    if rubric_field != "rubrics":
        kwargs["rubric_field"] = rubric_field
    return JudgeMetric(
        name,
        verdict_of,
        aggregation,
        True,
        frozenset({OutputType.GENERATE_UNTIL}),
        kwargs,
        grader=built,
    )


@register_metric("judge_score", output_type=OutputType.GENERATE_UNTIL, judge=True)
def judge_score(**options: Any) -> Metric:
    """MT-Bench single-answer grading: the judge scores the answer from 1 to 10 (verdict
    ``[[N]]``, see SCORE_PATTERN); the task's number is the mean over parsed verdicts."""
    return judge_metric("judge_score", "score", options)


@register_metric("judge_pairwise", output_type=OutputType.GENERATE_UNTIL, judge=True)
def judge_pairwise(**options: Any) -> Metric:
    """Win rate against the doc's reference answer (AlpacaEval / Arena-Hard style): the judge
    compares both orders, win 1, tie 0.5, loss 0, averaged over the two orders."""
    return judge_metric("judge_pairwise", "pairwise", options)


@register_metric("judge_correct", output_type=OutputType.GENERATE_UNTIL, judge=True)
def judge_correct(**options: Any) -> Metric:
    """Reference-guided correctness (MT-Bench's reference-guided grading, as yes/no): 1 when
    the judge says ``[[YES]]``, 0 for ``[[NO]]``."""
    return judge_metric("judge_correct", "correct", options)


@register_metric("judge_rubric", output_type=OutputType.GENERATE_UNTIL, judge=True)
def judge_rubric(**options: Any) -> Metric:
    """Rubric checklist grading as HealthBench does (Arora et al., 2025; openai/simple-evals
    ``healthbench_eval.py``): the doc's ``rubrics`` field (option ``rubric_field``) lists items
    ``{"criterion": text, "points": number}``; the judge says per item whether the answer meets
    it (``"criteria_met": true/false``); the answer's score is the points of the items met over
    the total positive points, and the task's number is the mean clipped to [0, 1]."""
    return judge_metric("judge_rubric", "rubric", options, aggregation="clipped_nanmean")
