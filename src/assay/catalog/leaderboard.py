"""Open LLM Leaderboard v2 style tasks and the `leaderboard` suite, as lm-eval 0.4.13 defines them.

- `leaderboard_math_<subject>_hard` (7 subjects) and the group `leaderboard_math_hard`: the
  level-5 problems of MATH (`DigitalLearningGmbH/MATH-lighteval`, test split) with the Minerva
  four-shot prompt (the leaderboard's copy, typos included), greedy until "Problem:" with at
  most 1024 new tokens. `exact_match` is Math-Verify's judgement of the response against the
  reference solution's boxed LaTeX answer; `exact_match_original` is the leaderboard's first
  scoring (Minerva normalisation of the stated final answer, then string or symbolic equality).
- `leaderboard_ifeval`: IFEval as in `ifeval_hub`, from `wis-k/instruction-following-eval`.
- `leaderboard`: the suite, as lm-eval's `leaderboard` group: leaderboard_mmlu_pro,
  leaderboard_bbh, leaderboard_gpqa, leaderboard_math_hard, leaderboard_ifeval and
  leaderboard_musr (the other families live in their own modules), with acc, acc_norm,
  exact_match and the four IFEval metrics each averaged over the tasks that report it, weighted
  by their number of docs.

Deviation (as in `minerva_math`): symbolic equality for `exact_match_original` parses LaTeX with
Math-Verify's parser (latex2sympy2_extended) instead of sympy's ANTLR 4.11 parser.
lm-eval pins no dataset revisions.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from assay.catalog import ifeval
from assay.catalog._common import LM_EVAL_DEFAULTS, Row, generation_doc, map_rows
from assay.catalog._generative import computed_metrics
from assay.catalog.minerva_math import (
    INVALID_ANSWER,
    REMOVED_EXPRESSIONS,
    SUBSTITUTIONS,
    last_boxed,
    stated_answer,
)
from assay.doc import Doc, OutputType
from assay.tasks.config import MetricSpec, TaskConfig
from assay.tasks.lm_eval_yaml import GroupConfig

SUBJECTS = {
    "algebra": "algebra",
    "counting_and_prob": "counting_and_probability",
    "geometry": "geometry",
    "intermediate_algebra": "intermediate_algebra",
    "num_theory": "number_theory",
    "prealgebra": "prealgebra",
    "precalculus": "precalculus",
}
"""Task infix -> dataset subset."""

FEWSHOT_EXAMPLES: list[Row] = [
    {
        'problem': 'Find the domain of the expression  $\\frac{\\sqrt{x-2}}{\\sqrt{5-x}}$.}',
        'solution': 'The expressions inside each square root must be non-negative. Therefore, $x-2 \\ge 0$, so $x\\ge2$, and $5 - x \\ge 0$, so $x \\le 5$. Also, the denominator cannot be equal to zero, so $5-x>0$, which gives $x<5$. Therefore, the domain of the expression is $\\boxed{[2,5)}$.\nFinal Answer: The final answer is $[2,5)$. I hope it is correct.',
        'few_shot': '1',
        'level': 'Level 5',
    },
    {
        'problem': 'If $\\det \\mathbf{A} = 2$ and $\\det \\mathbf{B} = 12,$ then find $\\det (\\mathbf{A} \\mathbf{B}).$',
        'solution': 'We have that $\\det (\\mathbf{A} \\mathbf{B}) = (\\det \\mathbf{A})(\\det \\mathbf{B}) = (2)(12) = \\boxed{24}.$\nFinal Answer: The final answer is $24$. I hope it is correct.',
        'few_shot': '1',
        'level': 'Level 5',
    },
    {
        'problem': 'Terrell usually lifts two 20-pound weights 12 times. If he uses two 15-pound weights instead, how many times must Terrell lift them in order to lift the same total weight?',
        'solution': 'If Terrell lifts two 20-pound weights 12 times, he lifts a total of $2\\cdot 12\\cdot20=480$ pounds of weight.  If he lifts two 15-pound weights instead for $n$ times, he will lift a total of $2\\cdot15\\cdot n=30n$ pounds of weight.  Equating this to 480 pounds, we can solve for $n$:\n\\begin{align*}\n30n&=480\\\n\\Rightarrow\\qquad n&=480/30=\\boxed{16}\n\\end{align*}\nFinal Answer: The final answer is $16$. I hope it is correct.',
        'few_shot': '1',
        'level': 'Level 5',
    },
    {
        'problem': 'If the system of equations\n\n\\begin{align*}\n6x-4y&=a,\\\n6y-9x &=b.\n\\end{align*}has a solution $(x, y)$ where $x$ and $y$ are both nonzero,\nfind $\\frac{a}{b},$ assuming $b$ is nonzero.',
        'solution': 'If we multiply the first equation by $-\\frac{3}{2}$, we obtain\n\n$$6y-9x=-\\frac{3}{2}a.$$Since we also know that $6y-9x=b$, we have\n\n$$-\\frac{3}{2}a=b\\Rightarrow\\frac{a}{b}=\\boxed{-\\frac{2}{3}}.$$\nFinal Answer: The final answer is $-\\frac{2}{3}$. I hope it is correct.',
        'few_shot': '1',
        'level': 'Level 5',
    },
]  # fmt: skip
"""The leaderboard's copy of Minerva's four-shot prompt (it differs from `minerva_math`'s in a
stray "}" and two line breaks)."""


def unbox(boxed: str) -> str:
    """The content of a `\\boxed` expression, or INVALID_ANSWER."""
    if "\\boxed " in boxed:
        return boxed[len("\\boxed ") :] if boxed.startswith("\\boxed ") else INVALID_ANSWER
    if boxed.startswith("\\boxed{") and boxed.endswith("}"):
        return boxed[len("\\boxed{") : -1]
    return INVALID_ANSWER


def normalize_v1(answer: str) -> str:
    """The leaderboard's frozen Minerva normalisation: plain substring removal of units (no
    word boundaries), the older \\sqrt shorthand rule, commas dropped from digit strings."""
    answer = answer.split("=")[-1]
    for before, after in SUBSTITUTIONS:
        answer = answer.replace(before, after)
    for expr in REMOVED_EXPRESSIONS:
        answer = answer.replace(expr, "")
    answer = re.sub(r"(.*?)(\$)(.*?)(\$)(.*)", "$\\3$", answer)
    for command in ("text", "textbf", "overline"):
        answer = re.sub(rf"(\\{command}\{{)(.*?)(\}})", "\\2", answer)
    answer = re.sub(r"(\\boxed\{)(.*)(\})", "\\2", answer)
    answer = re.sub(r"(frac)([^{])(.)", "frac{\\2}{\\3}", answer)
    answer = re.sub(r"(sqrt)([^{])", "sqrt{\\2}", answer)
    answer = answer.replace("$", "")
    if answer.replace(",", "").isdigit():
        answer = answer.replace(",", "")
    return answer


def _symbolically_equal(a: str, b: str) -> bool:
    from assay.catalog.minerva_math import TimeLimit

    try:
        import sympy
        from latex2sympy2_extended import latex2sympy

        with TimeLimit(1):
            return bool(sympy.simplify(latex2sympy(a) - latex2sympy(b)) == 0)
    except Exception:
        return False


def exact_match_original(row: Row, response: str) -> int:
    """The leaderboard's first scoring: stated final answer vs boxed answer, both normalised."""
    answer = normalize_v1(stated_answer(response))
    gold = normalize_v1(row["answer"])
    if answer == INVALID_ANSWER:
        return 0
    return int(answer.strip() == gold.strip() or _symbolically_equal(answer, gold))


def boxed_answer_verified(solution: str, response: str) -> bool:
    """Math-Verify: the response's answer equals the solution's LaTeX (boxed) answer."""
    from math_verify import LatexExtractionConfig, parse, verify

    # Math-Verify's limits use SIGALRM, which only the main thread may set.
    limit = 5 if threading.current_thread() is threading.main_thread() else None
    gold = parse(solution, extraction_config=[LatexExtractionConfig()], parsing_timeout=limit)
    return bool(verify(gold, parse(response, parsing_timeout=limit), timeout_seconds=limit))


def math_hard_results(row: Row, results: list[Any]) -> dict[str, int]:
    """exact_match (Math-Verify) and exact_match_original (normalised final answer)."""
    response = results[0]
    try:
        original = exact_match_original(row, response)
    except Exception:
        original = 0
    return {
        "exact_match": int(boxed_answer_verified(row["solution"], response)),
        "exact_match_original": original,
    }


def _processed(row: Row) -> Row:
    return {
        "problem": row["problem"],
        "solution": row["solution"],
        "answer": unbox(last_boxed(row["solution"]) or INVALID_ANSWER),
    }


def _level_5(rows: Any) -> list[Row]:
    """Level-5 problems only, with the boxed answer extracted."""
    return map_rows(_processed)([row for row in rows if row["level"] == "Level 5"])


def math_hard_prompt(row: Row, task_name: str) -> Doc:
    """ "Problem:\\n...\\n\\nSolution:"; target: the boxed answer (examples: the solution)."""
    target = row["solution"] if "few_shot" in row else row["answer"]
    return generation_doc("Problem:\n" + row["problem"] + "\n\nSolution:", target)


def _math_hard(infix: str, subset: str) -> TaskConfig:
    return TaskConfig(
        name=f"leaderboard_math_{infix}_hard",
        prompt_function=math_hard_prompt,
        hf_repo="DigitalLearningGmbH/MATH-lighteval",
        hf_subset=subset,
        metrics=computed_metrics("exact_match", "exact_match_original"),
        process_docs=_level_5,
        process_results=math_hard_results,
        evaluation_splits=("test",),
        fewshot_samples=FEWSHOT_EXAMPLES,
        few_shots_select="first_n",
        num_fewshots=4,
        output_type=OutputType.GENERATE_UNTIL,
        generation_kwargs={
            "until": ["Problem:"],
            "do_sample": False,
            "temperature": 0,
            "max_gen_toks": 1024,
        },
        version=3.0,
        example_rows=[
            {
                "problem": "What is $2+3$?",
                "level": "Level 5",
                "type": "Prealgebra",
                "solution": "We have $2+3=\\boxed{5}$.",
            }
        ],
        **LM_EVAL_DEFAULTS,
    )


_IFEVAL_HUB = next(t for t in ifeval.TASKS_TABLE if t.name == "ifeval_hub")


def _inst_level_acc(per_sample: Sequence[list[bool]]) -> float:
    """IFEval's instruction-level accuracy as a plain function, which gets no standard error
    (lm-eval reports "N/A"); imported when used, so listing tasks needs no metric code."""
    from assay.metrics.ifeval import inst_level_acc

    return inst_level_acc(per_sample)


def _ifeval_metrics() -> list[MetricSpec]:
    """IFEval's metrics, the instruction-level ones aggregated without a standard error."""
    specs = [m for m in _IFEVAL_HUB.metrics if isinstance(m, MetricSpec)]
    assert len(specs) == len(_IFEVAL_HUB.metrics), "ifeval's metrics are MetricSpecs"
    return [
        MetricSpec(spec.name, aggregation=_inst_level_acc)
        if spec.name.startswith("inst_level")
        else spec
        for spec in specs
    ]


TASKS_TABLE = [_math_hard(infix, subset) for infix, subset in SUBJECTS.items()] + [
    replace(
        _IFEVAL_HUB,
        name="leaderboard_ifeval",
        hf_repo="wis-k/instruction-following-eval",
        metrics=_ifeval_metrics(),
        version=3.0,
        source="",
    )
]

_BY_SIZE = {"aggregation": "mean", "weight_by_size": True}

GROUPS = [
    GroupConfig(
        name="leaderboard_math_hard",
        tasks=[f"leaderboard_math_{infix}_hard" for infix in SUBJECTS],
        aggregate_metric_list=[{"metric": "exact_match", **_BY_SIZE}],
    ),
    GroupConfig(name="leaderboard_instruction_following", tasks=["leaderboard_ifeval"]),
    GroupConfig(
        name="leaderboard",
        tasks=[
            "leaderboard_mmlu_pro",
            "leaderboard_bbh",
            "leaderboard_gpqa",
            "leaderboard_math_hard",
            "leaderboard_ifeval",
            "leaderboard_musr",
        ],
        aggregate_metric_list=[
            {"metric": metric, **_BY_SIZE}
            for metric in (
                "acc",
                "acc_norm",
                "exact_match",
                "inst_level_loose_acc",
                "inst_level_strict_acc",
                "prompt_level_loose_acc",
                "prompt_level_strict_acc",
            )
        ],
        version=1.0,
    ),
]
