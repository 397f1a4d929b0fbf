"""MATH (Hendrycks et al. 2021) as Minerva (Lewkowycz et al. 2022) prompts it; and MATH-500.

Seven subject tasks `minerva_math_<subject>` and the group `minerva_math` (exact_match and
math_verify averaged over subjects weighted by size), plus `minerva_math500` on the 500-problem
subset of Lightman et al. (2023), all as lm-eval 0.4.13 defines them: "Problem:\\n...\\n\\n
Solution:", the four fixed Minerva examples (full solutions ending in "Final Answer: The final
answer is ... I hope it is correct."), greedy until "Problem:". Two scores per answer:

- `exact_match`: the text after "Final Answer: The final answer is" and the boxed answer of the
  reference solution, both normalised as in Minerva's appendix D, are equal or symbolically
  equal (their difference simplifies to 0).
- `math_verify`: Math-Verify finds the response's answer equivalent to the reference solution's
  (assay's `math_verify` rule, applied to the whole solution as lm-eval does).

Deviation: lm-eval parses LaTeX for `exact_match` with sympy's ANTLR 4.11 parser; assay uses
the LaTeX parser Math-Verify ships (latex2sympy2_extended), since the two ANTLR runtimes cannot
be installed together. The frozen parity rows score the same with both.

Datasets: `EleutherAI/hendrycks_math` (one subset per subject, test split) and
`HuggingFaceH4/MATH-500` (test split); lm-eval pins no revision. Other harnesses' `math_500` tasks
prompt differently (zero-shot, boxed answers); assay follows lm-eval's `minerva_math500`.
"""

from __future__ import annotations

import re
import signal
import threading
from typing import Any

from assay.catalog._common import LM_EVAL_DEFAULTS, Row, generation_doc, map_rows
from assay.catalog._generative import computed_metrics
from assay.doc import Doc, OutputType
from assay.tasks.config import TaskConfig
from assay.tasks.lm_eval_yaml import GroupConfig

SUBJECTS = {
    "algebra": "algebra",
    "counting_and_prob": "counting_and_probability",
    "geometry": "geometry",
    "intermediate_algebra": "intermediate_algebra",
    "num_theory": "number_theory",
    "prealgebra": "prealgebra",
    "precalc": "precalculus",
}
"""Task suffix -> dataset subset."""

FEWSHOT_EXAMPLES: list[Row] = [
    {
        "problem": "Find the domain of the expression  $\\frac{\\sqrt{x-2}}{\\sqrt{5-x}}$.",
        "solution": "The expressions inside each square root must be non-negative. Therefore, $x-2 \\ge 0$, so $x\\ge2$, and $5 - x \\ge 0$, so $x \\le 5$. Also, the denominator cannot be equal to zero, so $5-x>0$, which gives $x<5$. Therefore, the domain of the expression is $\\boxed{[2,5)}$.\nFinal Answer: The final answer is $[2,5)$. I hope it is correct.",
        "few_shot": "1",
    },
    {
        "problem": "If $\\det \\mathbf{A} = 2$ and $\\det \\mathbf{B} = 12,$ then find $\\det (\\mathbf{A} \\mathbf{B}).$",
        "solution": "We have that $\\det (\\mathbf{A} \\mathbf{B}) = (\\det \\mathbf{A})(\\det \\mathbf{B}) = (2)(12) = \\boxed{24}.$\nFinal Answer: The final answer is $24$. I hope it is correct.",
        "few_shot": "1",
    },
    {
        "problem": "Terrell usually lifts two 20-pound weights 12 times. If he uses two 15-pound weights instead, how many times must Terrell lift them in order to lift the same total weight?",
        "solution": "If Terrell lifts two 20-pound weights 12 times, he lifts a total of $2\\cdot 12\\cdot20=480$ pounds of weight.  If he lifts two 15-pound weights instead for $n$ times, he will lift a total of $2\\cdot15\\cdot n=30n$ pounds of weight.  Equating this to 480 pounds, we can solve for $n$:\n\\begin{align*}\n30n&=480\\\\\n\\Rightarrow\\qquad n&=480/30=\\boxed{16}\n\\end{align*}\nFinal Answer: The final answer is $16$. I hope it is correct.",
        "few_shot": "1",
    },
    {
        "problem": "If the system of equations\n\n\\begin{align*}\n6x-4y&=a,\\\\\n6y-9x &=b.\n\\end{align*}has a solution $(x, y)$ where $x$ and $y$ are both nonzero,\nfind $\\frac{a}{b},$ assuming $b$ is nonzero.",
        "solution": "If we multiply the first equation by $-\\frac{3}{2}$, we obtain\n\n$$6y-9x=-\\frac{3}{2}a.$$Since we also know that $6y-9x=b$, we have\n\n$$-\\frac{3}{2}a=b\\Rightarrow\\frac{a}{b}=\\boxed{-\\frac{2}{3}}.$$\nFinal Answer: The final answer is $-\\frac{2}{3}$. I hope it is correct.",
        "few_shot": "1",
    },
]  # fmt: skip
"""Minerva's four-shot prompt (Lewkowycz et al. 2022, appendix D.2)."""

# Minerva's normalisation lists (appendix D), with lm-eval 0.4.13's additions.
SUBSTITUTIONS = [
    ("an ", ""), ("a ", ""), (".$", "$"), ("\\$", ""), (r"\ ", ""), (" ", ""),
    ("mbox", "text"), (",\\text{and}", ","), ("\\text{and}", ","), ("\\text{m}", "\\text{}"),
]  # fmt: skip
REMOVED_EXPRESSIONS = [
    "square", "ways", "integers", "dollars", "mph", "inches", "ft", "hours", "km", "units",
    "\\ldots", "sue", "points", "feet", "minutes", "digits", "cents", "degrees", "cm", "gm",
    "pounds", "meters", "meals", "edges", "students", "childrentickets", "multiples",
    "\\text{s}", "\\text{.}", "\\text{\ns}", "\\text{}^2", "\\text{}^3", "\\text{\n}", "\\text{}",
    r"\mathrm{th}", r"^\circ", r"^{\circ}", r"\;", r",\!", "{,}", '"', "\\dots",
]  # fmt: skip

INVALID_ANSWER = "[invalidanswer]"
_FINAL_ANSWER = re.compile(r"Final Answer: The final answer is(.*?). I hope it is correct.")
_COMMAND = re.compile(r"(\\[a-zA-Z]+)")
_THOUSANDS = re.compile(r"-?\d{1,3}(,\d{3})+")


def last_boxed(text: str) -> str | None:
    """The last `\\boxed{...}` (or `\\fbox{...}`) of a solution with its braces balanced, or
    `\\boxed <text up to $>` for the brace-less form; None when there is none."""
    if "\\boxed " in text:
        return "\\boxed " + text.split("\\boxed ")[-1].split("$")[0]
    start = text.rfind("\\boxed")
    if start < 0:
        start = text.rfind("\\fbox")
        if start < 0:
            return None
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return None


def unbox(boxed: str | None) -> str:
    """The content of a `\\boxed` expression ("" when there is none: lm-eval fails there)."""
    if boxed is None:
        return ""
    if "\\boxed " in boxed:
        return boxed[len("\\boxed ") :]
    if boxed.startswith("\\boxed{") and boxed.endswith("}"):
        return boxed[len("\\boxed{") : -1]
    return ""


def _drop_units_outside_commands(text: str, unit: str) -> str:
    # Units glued to other text once spaces are gone, never inside a LaTeX command name
    # ("ft" must survive in "\left").
    parts = _COMMAND.split(text)
    parts[::2] = [part.replace(unit, "") for part in parts[::2]]
    return "".join(parts)


def normalize_final_answer(answer: str) -> str:
    """Minerva's answer normalisation (appendix D) as lm-eval 0.4.13 applies it."""
    answer = answer.split("=")[-1]
    words = [expr for expr in REMOVED_EXPRESSIONS if expr.isalpha()]
    for word in words:
        answer = re.sub(rf"(?<!\\)\b{word}\b", "", answer)
    for before, after in SUBSTITUTIONS:
        answer = answer.replace(before, after)
    for expr in REMOVED_EXPRESSIONS:
        if expr.isalpha():
            answer = _drop_units_outside_commands(answer, expr)
        else:
            answer = answer.replace(expr, "")
    answer = re.sub(r"(.*?)(\$)(.*?)(\$)(.*)", "$\\3$", answer)
    for command in ("text", "textbf", "overline"):
        answer = re.sub(rf"(\\{command}\{{)(.*?)(\}})", "\\2", answer)
    answer = re.sub(r"(\\boxed\{)(.*)(\})", "\\2", answer)
    answer = re.sub(r"(frac)([^{])(.)", "frac{\\2}{\\3}", answer)
    answer = re.sub(r"(sqrt)(\[[^\]]*\])(\w)", "\\1\\2{\\3}", answer)
    answer = re.sub(r"(sqrt)(?!\[)([^{])", "sqrt{\\2}", answer)
    answer = answer.replace("$", "")
    if _THOUSANDS.fullmatch(answer):
        answer = answer.replace(",", "")
    return answer


def stated_answer(response: str) -> str:
    """The text after "Final Answer: The final answer is" (the closing sentence optional)."""
    match = _FINAL_ANSWER.search(response + "I hope it is correct.")
    return match.group(1).strip() if match else INVALID_ANSWER


class TimeLimit:
    """Context manager: raise TimeoutError after `seconds` (main thread only: SIGALRM)."""

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds
        self.active = threading.current_thread() is threading.main_thread()

    def _expired(self, signum: int, frame: Any) -> None:
        raise TimeoutError

    def __enter__(self) -> None:
        if self.active:
            self.previous = signal.signal(signal.SIGALRM, self._expired)
            signal.alarm(self.seconds)

    def __exit__(self, *exc: Any) -> None:
        if self.active:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, self.previous)


def equivalent(a: str, b: str) -> bool:
    """Normalised answers are equal, or their LaTeX parses differ by something that simplifies
    to 0 (5 seconds at most; any parse or algebra failure counts as different)."""
    if a and a == b:
        return True
    try:
        import sympy
        from latex2sympy2_extended import latex2sympy

        with TimeLimit(5):
            difference = latex2sympy(a) - latex2sympy(b)
            return bool(sympy.simplify(difference) == 0)
    except Exception:
        return False


def minerva_results(row: Row, results: list[Any]) -> dict[str, int]:
    """exact_match (normalised final answer) and math_verify (whole response vs solution)."""
    from assay.metrics.math import answers_match

    response = results[0]
    exact = equivalent(normalize_final_answer(stated_answer(response)), row["answer"])
    return {
        "exact_match": int(exact),
        "math_verify": int(answers_match(row["solution"], response)),
    }


def _processed(row: Row) -> Row:
    return {
        "problem": row["problem"],
        "solution": row["solution"],
        "answer": normalize_final_answer(unbox(last_boxed(row["solution"]))),
    }


def minerva_prompt(row: Row, task_name: str) -> Doc:
    """ "Problem:\\n...\\n\\nSolution:"; the target is the normalised answer (few-shot examples:
    the full solution)."""
    target = row["solution"] if "few_shot" in row else row["answer"]
    return generation_doc("Problem:\n" + row["problem"] + "\n\nSolution:", target)


_EXAMPLES = [
    {
        "problem": "What is $2+3$?",
        "level": "Level 1",
        "type": "Prealgebra",
        "solution": "We have $2+3=\\boxed{5}$.",
    }
]


def _minerva(name: str, repo: str, subset: str) -> TaskConfig:
    return TaskConfig(
        name=name,
        prompt_function=minerva_prompt,
        hf_repo=repo,
        hf_subset=subset,
        metrics=computed_metrics("exact_match", "math_verify"),
        process_docs=map_rows(_processed),
        process_results=minerva_results,
        evaluation_splits=("test",),
        fewshot_samples=FEWSHOT_EXAMPLES,
        few_shots_select="first_n",
        num_fewshots=4,
        output_type=OutputType.GENERATE_UNTIL,
        generation_kwargs={"until": ["Problem:"], "do_sample": False, "temperature": 0},
        tags=["math_word_problems"],
        version=3.1,
        example_rows=_EXAMPLES,
        **LM_EVAL_DEFAULTS,
    )


TASKS_TABLE = [
    _minerva(f"minerva_math_{suffix}", "EleutherAI/hendrycks_math", subset)
    for suffix, subset in SUBJECTS.items()
] + [_minerva("minerva_math500", "HuggingFaceH4/MATH-500", "default")]

GROUPS = [
    GroupConfig(
        name="minerva_math",
        tasks=[f"minerva_math_{suffix}" for suffix in SUBJECTS],
        aggregate_metric_list=[
            {"metric": "exact_match", "aggregation": "mean", "weight_by_size": True},
            {"metric": "math_verify", "aggregation": "mean", "weight_by_size": True},
        ],
        version=1.0,
    )
]
