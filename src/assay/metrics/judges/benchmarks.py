"""Judge metrics with a published benchmark's own judge prompts and verdict parsing.

`judge_mt_bench`: MT-Bench single-answer grading (Zheng et al., 2023, "Judging LLM-as-a-Judge
with MT-Bench and Chatbot Arena"), with FastChat's judge prompts as published in
`fastchat/llm_judge/data/judge_prompts.jsonl` (Apache-2.0, bundled unchanged in
`assay/data/mt_bench/`): `single-v1` for a first turn, `single-v1-multi-turn` for a second,
and their reference-guided `single-math-v1*` variants when the doc has reference answers (the
math, reasoning and coding categories). The rating is read as FastChat's `run_judge_single`
does: the first ``[[N]]``, else the first ``[N]``.

`judge_alpaca_eval`: AlpacaEval 2.0's pairwise preference (Dubois et al., 2024,
"Length-Controlled AlpacaEval"), with the `alpaca_eval_clf_gpt4_turbo` annotator prompt of
tatsu-lab/alpaca_eval (Apache-2.0 code, bundled unchanged in `assay/data/alpaca_eval/`): the
judge names the better of two outputs, ``m`` (the first) or ``M`` (the second). AlpacaEval reads
the probability of ``m`` from the judge's log-probabilities and randomises the order once;
assay asks for the generated identifier in both orders instead, so a judge's position bias
cancels and a split decision counts as a tie (0.5).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from assay.doc import OutputType
from assay.errors import DataError
from assay.metrics.base import Metric, register_metric
from assay.metrics.judges.grading import OUTCOME_POINTS, Grader, JudgeInput, Prompt, judge_metric

MT_BENCH_SCORE = re.compile(r"\[\[(\d+\.?\d*)\]\]")
"""FastChat's `one_score_pattern`: the first match is the rating."""
MT_BENCH_SCORE_BACKUP = re.compile(r"\[(\d+\.?\d*)\]")
"""FastChat's `one_score_pattern_backup`, tried when the first finds nothing."""
ALPACA_VERDICT = re.compile(r"^\s*([mM])\b")
"""The annotator answers with the identifier alone: ``m`` (first output) or ``M`` (second)."""


@cache
def _mt_bench_prompts() -> dict[str, dict[str, str]]:
    text = resources.files("assay.data.mt_bench").joinpath("judge_prompts.jsonl")
    lines = text.read_text(encoding="utf-8").splitlines()
    return {r["name"]: r for r in (json.loads(line) for line in lines if line.strip())}


@cache
def _alpaca_prompt() -> dict[str, str]:
    text = resources.files("assay.data.alpaca_eval").joinpath("judge_prompt.json")
    return dict(json.loads(text.read_text(encoding="utf-8")))


@dataclass(frozen=True)
class MTBenchGrader(Grader):
    """MT-Bench single-answer grading of a first or second turn."""

    def prompts(self, given: JudgeInput) -> list[Prompt]:
        """FastChat's prompt for the doc's turn (with references when the doc has them), as a
        system and a user message."""
        turn = len(given.history) + 1
        if turn > 2:
            raise DataError(f"MT-Bench grades first and second turns; this doc has {turn}.")
        refs = given.references or []
        guided = bool(refs)
        name = ("single-math-v1" if guided else "single-v1") + ("-multi-turn" if turn == 2 else "")
        prompt = _mt_bench_prompts()[name]
        fields: dict[str, Any] = {}
        if guided:
            fields["ref_answer_1"] = refs[0]
            if turn == 2:
                if len(refs) < 2:
                    raise DataError("MT-Bench's second turn needs a second reference answer.")
                fields["ref_answer_2"] = refs[1]
        if turn == 1:
            fields.update(question=given.question, answer=given.answer)
        else:
            ((first_question, first_answer),) = given.history
            fields.update(
                question_1=first_question,
                answer_1=first_answer,
                question_2=given.question,
                answer_2=given.answer,
            )
        user = prompt["prompt_template"].format(**fields)
        return [(("system", prompt["system_prompt"]), ("user", user))]

    def labels(self, verdicts: list[str]) -> list[str | None]:
        found = MT_BENCH_SCORE.search(verdicts[0]) or MT_BENCH_SCORE_BACKUP.search(verdicts[0])
        return [found.group(1) if found else None]

    def score(self, verdicts: list[str], rubric: Any = None) -> tuple[float, str | None]:
        (label,) = self.labels(verdicts)
        if label is None:
            return math.nan, "no [[rating]] in the verdict"
        return float(label), None


@dataclass(frozen=True)
class AlpacaEvalGrader(Grader):
    """AlpacaEval's annotator, asked in both orders (model first, then reference first)."""

    def prompts(self, given: JudgeInput) -> list[Prompt]:
        if given.reference is None:
            raise DataError("judge_alpaca_eval needs the reference output of the doc.")
        prompt = _alpaca_prompt()

        def fill(first: str, second: str) -> Prompt:
            user = (
                prompt["prompt_template"]
                .replace("{instruction}", given.question)
                .replace("{output_1}", first)
                .replace("{output_2}", second)
            )
            return (("system", prompt["system_prompt"]), ("user", user))

        return [fill(given.answer, given.reference), fill(given.reference, given.answer)]

    def labels(self, verdicts: list[str]) -> list[str | None]:
        found = [ALPACA_VERDICT.match(v) for v in verdicts]
        return [None if f is None else ("A" if f.group(1) == "m" else "B") for f in found]

    def score(self, verdicts: list[str], rubric: Any = None) -> tuple[float, str | None]:
        first, second = self.labels(verdicts)
        if first is None or second is None:
            order = "model first" if first is None else "reference first"
            return math.nan, f"the verdict does not start with m or M ({order})"
        return (OUTCOME_POINTS[first] + (1.0 - OUTCOME_POINTS[second])) / 2, None


@register_metric("judge_mt_bench", output_type=OutputType.GENERATE_UNTIL, judge=True)
def judge_mt_bench(**options: Any) -> Metric:
    """MT-Bench single-answer grading (1-10) with FastChat's judge prompts; a doc's turn is
    its number of follow-up turns plus one, its references `Doc.specific["references"]`."""
    # FastChat asks its GPT-4 judge for up to 2048 tokens.
    grader = MTBenchGrader("score", None, max_gen_toks=2048)
    return judge_metric("judge_mt_bench", "score", options, grader=grader)


@register_metric("judge_alpaca_eval", output_type=OutputType.GENERATE_UNTIL, judge=True)
def judge_alpaca_eval(**options: Any) -> Metric:
    """AlpacaEval win rate against the doc's reference output: the annotator's ``m``/``M`` in
    both orders, win 1, tie (a split decision) 0.5, loss 0."""
    grader = AlpacaEvalGrader("pairwise", None)
    return judge_metric("judge_alpaca_eval", "pairwise", options, grader=grader)
