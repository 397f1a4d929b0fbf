"""assay scores programs by evaluate's code_eval rules: its pass@k estimator and its verdicts.

The estimator is pinned against exact combinatorics (1 - C(n-c, k) / C(n, k), computed with
math.comb in fractions). The verdicts are checked end to end for each honest class through
the sandboxed code_eval lm-eval's tasks get: a correct program passes; a wrong one, an
exception or a syntax error fails ("failed: ..."); a program that never ends, or whose code
returns after `timeout` seconds of its own run time, is "timed out", as code_eval's timer
says. (benchmarks/code_eval_parity.py compares with evaluate's code_eval itself.)
"""

from __future__ import annotations

from fractions import Fraction
from math import comb

import numpy as np
import pytest

from assay.sandbox import SandboxPolicy
from assay.sandbox.code_eval import SandboxedCodeEval
from assay.sandbox.policy import using
from assay.sandbox.programs import pass_at_k


def exact(n: int, c: int, k: int) -> Fraction:
    return 1 - Fraction(comb(n - c, k), comb(n, k))


def test_pass_at_k_is_the_exact_unbiased_estimate():
    checked = 0
    for n in range(1, 41):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(float(exact(n, c, k)), abs=1e-12)
                checked += 1
    assert checked == sum(n * (n + 1) for n in range(1, 41))
    # Large n stays exact where the binomials themselves would overflow a float.
    assert pass_at_k(200, 3, 100) == pytest.approx(float(exact(200, 3, 100)), abs=1e-12)
    assert pass_at_k(5, 0, 1) == 0.0 and pass_at_k(5, 5, 1) == 1.0 and pass_at_k(5, 3, 3) == 1.0


ADD = "def add(a, b):\n    return a + b\n"
CLASSES = {
    "correct": ADD,
    "correct after a short wait": "import time\ntime.sleep(0.2)\n" + ADD,
    "wrong": "def add(a, b):\n    return a - b\n",
    "exception": "def add(a, b):\n    return undefined_name\n",
    "syntax error": "def add(a, b):\n    return (\n",
    "never ends": "while True:\n    pass\n",
    "returns after its time": "import time\ntime.sleep(4.5)\n" + ADD,
    # code_eval runs programs without a __name__ of their own: a script block does not run.
    "correct with a script block": ADD
    + "if __name__ == '__main__':\n    print(add(int(input()), 1))\n",
}
VERDICT = {
    "correct": "passed",
    "correct after a short wait": "passed",
    "wrong": "failed",
    "exception": "failed",
    "syntax error": "failed",
    "never ends": "timed out",
    "returns after its time": "timed out",
    "correct with a script block": "passed",
}


@pytest.mark.parametrize("mode", ["bwrap", "rlimits"])
def test_each_honest_class_gets_code_eval_s_verdict_and_pass_at_k(mode):
    # Problem 0 holds every class; problem 1 four right answers of five (distinct texts).
    predictions = [
        list(CLASSES.values()),
        [ADD + f"# {i}\n" for i in range(4)] + [CLASSES["wrong"]],
    ]
    tests = ["assert add(2, 3) == 5\n"] * 2
    with using(SandboxPolicy(mode)):  # type: ignore[arg-type]
        scores, results = SandboxedCodeEval().compute(
            # code_eval's own default of 3 s: room for a program's start on a busy machine
            predictions=predictions,
            references=tests,
            k=[1, 2, 5, 7],
            timeout=3.0,
        )
    verdicts = [r["result"] for _, r in results[0]]
    kinds = ["failed" if v.startswith("failed: ") else v for v in verdicts]
    assert kinds == list(VERDICT.values()), verdicts
    assert [r["passed"] for _, r in results[1]] == [True] * 4 + [False]
    # pass@7 is left out, as code_eval leaves it: problem 1 has only five candidates.
    assert set(scores) == {"pass@1", "pass@2", "pass@5"}
    for k in (1, 2, 5):
        expected = np.mean([float(exact(8, 3, k)), float(exact(5, 4, k))])
        assert scores[f"pass@{k}"] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("mode", ["bwrap", "rlimits"])
def test_programs_run_as_main_unless_scored_by_code_eval_rules(mode):
    from assay.sandbox import Limits, run_many
    from assay.sandbox.programs import run_programs

    program = "print(__name__)\n"
    with using(SandboxPolicy(mode)):  # type: ignore[arg-type]
        [script] = run_many([program], Limits(timeout_s=20.0))
        [scored] = run_programs([program])
    assert (script.stdout, scored.stdout) == ("__main__\n", "builtins\n")
