"""Generative catalog tasks: scoring rules checked against values lm-eval 0.4.13 gives, code
execution through the sandbox, and the refusal of code tasks without consent.

The request/score parity of every generative family runs in test_catalog_parity.py on the
frozen data files; the expectations here were produced once by calling lm-eval 0.4.13's own
task utilities (minerva_math/utils.py, drop/utils.py) on the same inputs and frozen.
"""

from __future__ import annotations

from math import comb

import pytest

from assay.catalog import bbh, drop, humaneval, leaderboard, mbpp, minerva_math
from assay.errors import ConfigError
from assay.run.evaluation import Evaluation
from assay.run.settings import RunSettings
from assay.sandbox import run_untrusted
from assay.sandbox.programs import count_passing, pass_at_k, pass_at_ks
from assay.tasks.registry import Registry

# ---------------------------------------------------------------- code execution

ADD_TESTS = "def check(candidate):\n    assert candidate(2, 3) == 5\n\ncheck(add)"
RIGHT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a * b\n"


def test_a_correct_program_passes_and_a_wrong_one_fails_in_the_sandbox():
    assert count_passing([RIGHT], ADD_TESTS) == 1
    assert count_passing([WRONG], ADD_TESTS) == 0
    assert count_passing(["def add(a, b):\n    raise ValueError\n"], ADD_TESTS) == 0


def test_a_program_that_never_ends_is_stopped_and_fails():
    result = run_untrusted("while True:\n    pass\n", timeout_s=1.0)
    assert not result.passed and result.outcome == "timed_out"


def test_count_passing_counts_duplicates_once_each():
    assert count_passing([RIGHT, WRONG, RIGHT], ADD_TESTS) == 2


@pytest.mark.parametrize(
    "n,c,k", [(1, 0, 1), (1, 1, 1), (10, 3, 1), (10, 3, 5), (64, 2, 8), (64, 60, 8), (5, 0, 5)]
)
def test_pass_at_k_is_the_unbiased_estimator(n, c, k):
    assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k))


def test_pass_at_ks_leaves_out_k_larger_than_the_samples():
    assert pass_at_ks([RIGHT, WRONG], ADD_TESTS, [1, 2, 8]) == {"pass@1": 0.5, "pass@2": 1.0}


def test_humaneval_scores_header_plus_completion_against_the_tests():
    row = {
        "prompt": "def add(a, b):\n",
        "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n",
        "entry_point": "add",
    }
    programs = humaneval.with_header([["    return a + b\n", "    return a - b\n"]], [row])
    assert programs == [
        ["def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n"]
    ]
    score = humaneval.TASKS_TABLE[0].process_results
    assert score(row, [programs[0][:1]]) == {"pass@1": 1.0}
    assert score(row, [programs[0][1:]]) == {"pass@1": 0.0}


def test_mbpp_scores_the_completion_against_its_three_asserts():
    row = {"test_list": ["assert sq(2) == 4", "assert sq(3) == 9", "assert sq(0) == 0"]}
    assert mbpp.mbpp_results(row, ["def sq(x):\n    return x * x\n"]) == {"pass_at_1": 1.0}
    assert mbpp.mbpp_results(row, ["def sq(x):\n    return x + x\n"]) == {"pass_at_1": 0.0}


@pytest.mark.parametrize("task", ["humaneval", "humaneval_64", "mbpp"])
def test_code_tasks_are_refused_without_consent(task):
    resolved = Registry().resolve([task])
    with pytest.raises(ConfigError, match="--confirm-run-unsafe-code"):
        Evaluation(resolved, RunSettings(model="dummy"))


def test_code_tasks_are_accepted_with_consent():
    resolved = Registry().resolve(["humaneval"])
    Evaluation(resolved, RunSettings(model="dummy", confirm_run_unsafe_code=True))


# ---------------------------------------------------------------- minerva math

NORMALIZED = {
    "\\frac34": "\\frac{3}{4}",
    "$\\frac{3}{4}$": "\\frac{3}{4}",
    "10 \\text{ cm}^2": "10",
    "\\left( 3, \\frac{\\pi}{2} \\right)": "\\left(3,\\frac{\\pi}{2}\\right)",
    "x = 5": "5",
    "1,000": "1000",
    "0,1": "0,1",
    "\\sqrt2": "\\sqrt{2}",
    "\\sqrt[3]8": "\\sqrt[3]{8}",
    "5 dollars": "5",
    "\\$18.90": "18.90",
    "90^\\circ": "90",
    "\\text{(B)}": "(B)",
    "\\boxed{12}": "12",
    "2\\pi cm": "2\\pi",
    "\\textbf{yes}": "yes",
    "\\dfrac{1}{2}": "\\dfrac{1}{2}",
    "12 \\text{ inches}": "12",
    "3 ways": "3",
    "\\overline{AB}": "AB",
    "a square": "",
    "\\{1,2\\}": "\\{1,2\\}",
    "[invalidanswer]": "[invalidanswer]",
    "6.": "6.",
    "\\mbox{apples}": "apples",
}
"""lm-eval 0.4.13's normalize_final_answer on each input."""


@pytest.mark.parametrize("raw,expected", NORMALIZED.items())
def test_minerva_normalisation_matches_lm_eval(raw, expected):
    assert minerva_math.normalize_final_answer(raw) == expected


@pytest.mark.parametrize(
    "solution,boxed,content",
    [
        ("We get $\\boxed{\\frac{3}{4}}$.", "\\boxed{\\frac{3}{4}}", "\\frac{3}{4}"),
        ("So \\boxed 5$ done", "\\boxed 5", "5"),
        ("$\\boxed{x^{2}}$ and $\\boxed{y}$", "\\boxed{y}", "y"),
        ("no box", None, ""),
        ("\\boxed{a{b}", None, ""),
    ],
)
def test_boxed_answer_extraction_matches_lm_eval(solution, boxed, content):
    assert minerva_math.last_boxed(solution) == boxed
    assert minerva_math.unbox(boxed) == content


@pytest.mark.parametrize(
    "solution,answer",
    [
        ("We get $\\boxed{\\frac{3}{4}}$.", "\\frac{3}{4}"),
        ("So \\boxed 5$ done", "5"),
        ("no box", "[invalidanswer]"),
        ("\\boxed{a{b}", "[invalidanswer]"),
    ],
)
def test_leaderboard_math_gold_answers_mark_a_missing_box_invalid(solution, answer):
    # The leaderboard's gold answer is "[invalidanswer]" where a solution has no box.
    row = {"problem": "p", "solution": solution}
    assert leaderboard._processed(row)["answer"] == answer


@pytest.mark.parametrize(
    "response,answer",
    [
        ("Final Answer: The final answer is $7$. I hope it is correct.", "$7$"),
        ("Final Answer: The final answer is 12", "[invalidanswer]"),
        ("nothing", "[invalidanswer]"),
        (
            "Final Answer: The final answer is $\\frac{1}{2}$.I hope it is correct.",
            "[invalidanswer]",
        ),
    ],
)
def test_stated_answer_matches_lm_eval(response, answer):
    assert minerva_math.stated_answer(response) == answer


@pytest.mark.parametrize(
    "a,b,same",
    [
        ("\\frac{5}{2}", "2.5", True),
        ("3", "3", True),
        ("(-2,3)", "(-2,2)", False),
        ("x+1", "1+x", True),
        ("\\sqrt{4}", "2", True),
        ("9^2", "9", False),
        ("", "", False),
        ("2x", "x2", True),
        ("\\frac{1}{3}", "0.333", False),
    ],
)
def test_symbolic_equivalence_matches_lm_eval(a, b, same):
    assert minerva_math.equivalent(a, b) is same


def test_minerva_scores_a_right_and_a_wrong_answer():
    row = {"answer": "\\frac{3}{4}", "solution": "So it is $\\boxed{\\frac{3}{4}}$."}
    right = (
        "Thus $\\frac34$.\nFinal Answer: The final answer is $\\frac{3}{4}$. I hope it is correct."
    )
    wrong = "Final Answer: The final answer is $\\frac{2}{3}$. I hope it is correct."
    assert minerva_math.minerva_results(row, [right]) == {"exact_match": 1, "math_verify": 1}
    assert minerva_math.minerva_results(row, [wrong]) == {"exact_match": 0, "math_verify": 0}


# ---------------------------------------------------------------- drop


@pytest.mark.parametrize(
    "predicted,gold,em,f1",
    [
        (["2200"], ["2,200"], 1.0, 1.0),
        (["the Bears and the Lions"], ["Bears", "Lions"], 0.0, 0.25),
        (["Lions"], ["Bears", "Lions"], 0.0, 0.5),
        (["May 1872"], ["4 May 1872"], 0.0, 0.8),
        (["about 3.0 yards"], ["3"], 0.0, 0.5),
        (["  "], ["7"], 0.0, 0.0),
        (["Jason Hanson's kick"], ["Jason Hanson"], 0.0, 0.4),
    ],
)
def test_drop_em_and_f1_match_lm_eval(predicted, gold, em, f1):
    assert drop.em_and_f1(predicted, gold) == (em, f1)


def test_drop_normalisation_matches_lm_eval():
    assert drop.normalize("The 1,200 well-known Residents!") == "1200.0 well known residents"


# ---------------------------------------------------------------- bbh


def test_every_bbh_subset_has_a_description_and_three_exemplars():
    prompts = bbh.cot_prompts()
    assert sorted(prompts) == sorted(bbh.SUBSETS) and len(prompts) == 27
    for subset, entry in prompts.items():
        assert entry["description"].endswith("\n\n"), subset
        assert len(entry["samples"]) == 3, subset
        assert all("the answer is" in s["target"].lower() for s in entry["samples"]), subset


# ---------------------------------------------------------------- leaderboard math-hard

NORMALIZED_V1 = {
    "\\frac34": "\\frac{3}{4}",
    "10 \\text{ cm}^2": "10",
    "\\left( 3, \\frac{\\pi}{2} \\right)": "\\le(3,\\frac{\\pi}{2}\\right)",
    "x = 5": "5",
    "1,000": "1000",
    "0,1": "01",
    "\\sqrt2": "\\sqrt{2}",
    "\\sqrt[3]8": "\\sqrt{[}3]8",
    "5 dollars": "5",
    "2\\pi cm": "2\\pi",
    "a square": "",
    "6.": "6.",
}
"""lm-eval 0.4.13's leaderboard/math normalize_final_answer (the frozen older rules)."""


@pytest.mark.parametrize("raw,expected", NORMALIZED_V1.items())
def test_leaderboard_normalisation_matches_lm_eval(raw, expected):
    assert leaderboard.normalize_v1(raw) == expected


@pytest.mark.parametrize(
    "answer,response,score",
    [
        ("\\frac{3}{4}", "Final Answer: The final answer is $0.75$. I hope it is correct.", 1),
        (
            "5 \\text{ dollars}",
            "Final Answer: The final answer is $5$ dollars. I hope it is correct.",
            1,
        ),
        ("(-2,2)", "no final answer", 0),
        ("12", "Final Answer: The final answer is 13. I hope it is correct.", 0),
    ],
)
def test_leaderboard_original_scoring_matches_lm_eval(answer, response, score):
    assert leaderboard.exact_match_original({"answer": answer}, response) == score


def test_leaderboard_suite_holds_lm_evals_six_families():
    registry = Registry()
    suite = registry.get("leaderboard")
    resolved = registry.resolve(["leaderboard"])
    assert suite.tasks == [
        "leaderboard_mmlu_pro",
        "leaderboard_bbh",
        "leaderboard_gpqa",
        "leaderboard_math_hard",
        "leaderboard_ifeval",
        "leaderboard_musr",
    ]
    # 1 MMLU-Pro + 24 BBH + 3 GPQA + 7 MATH + 1 IFEval + 3 MuSR, as lm-eval's group.
    assert len(resolved.tasks) == 39
