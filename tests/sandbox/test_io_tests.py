"""Programs checked against input/output tests (lighteval's LiveCodeBench metric) in the sandbox.

The checks follow LiveCodeBench's rules (call-based: the function's result equals the expected
JSON value; standard input: the printed lines equal, or equal as Decimals, a SystemExit ending
the call only); a program passes only when every test held and the checker returned, so the
hostile family (sys.exit, SystemExit, os._exit, atexit, excepthook, patched builtins) fails in
every mode. Parity with lighteval's own metric on honest programs is checked in lighteval's
virtualenv (tests/tasks/from_lighteval/side/check_code_metrics.py).
"""

from __future__ import annotations

import pytest

from assay.sandbox import SandboxPolicy
from assay.sandbox.io_tests import run_io_tests
from assay.sandbox.policy import using

MODES = ["bwrap", "rlimits", "none"]
HEADER = "import sys\nfrom collections import *\nsys.setrecursionlimit(50000)\n"
"""What lighteval puts before call-based code (a shortened import_string)."""


def solution(body: str) -> str:
    return HEADER + "class Solution:\n    def add(self, a, b):\n" + body


CALL_INPUTS, CALL_OUTPUTS = ["1\n2", "3\n4"], ["3", "7"]
HONEST = ["        return a + b\n", "        return a - b\n", "        raise ValueError(a)\n"]
"""Right, wrong, an exception."""
HOSTILE = {
    "forged answers line, then exit": (
        "        import os\n"
        '        os.write(1, b\'\\n\\x00assay-io-answers ["3", "7"]\\n\')\n'
        "        os._exit(0)\n"
    ),
    "the checker's own functions replaced": (
        "        import __main__, json\n"
        "        __main__._fail = lambda *a: None\n"
        "        __main__._dumps = lambda *a: json.dumps(3)\n"
        "        __main__._native = lambda *a: True\n"
    ),
    "sys.exit(0)": "        import sys\n        sys.exit(0)\n",
    "raise SystemExit(0)": "        raise SystemExit(0)\n",
    "os._exit(0)": "        import os\n        os._exit(0)\n",
    "atexit": "        import atexit, os\n        atexit.register(lambda: os._exit(0))\n",
    "excepthook": "        import os, sys\n        sys.excepthook = lambda *x: os._exit(0)\n",
    "builtins and the checker's helpers patched": (
        "        import builtins, json, os, sys\n"
        "        real = os._exit\n"
        "        builtins.exit = sys.exit = os._exit = lambda *x: real(0)\n"
        "        builtins.isinstance = lambda *x: True\n"
        "        json.loads = lambda *x: a - b\n"
        "        sys.excepthook = lambda *x: real(0)\n"
    ),
}


@pytest.mark.parametrize("mode", MODES)
def test_call_based_checks_and_the_hostile_family(mode):
    honest = [solution(body) for body in HONEST]
    hostile = [solution(code + "        return a - b\n") for code in HOSTILE.values()]
    with using(SandboxPolicy(mode)):  # type: ignore[arg-type]
        results = run_io_tests([*honest, *hostile], "add", CALL_INPUTS, CALL_OUTPUTS)
    right, wrong, exception, *attacks = results
    assert right.passed, right.stderr
    assert not wrong.passed and wrong.detail == "test 0: wrong result"
    assert not exception.passed and "ValueError" in exception.stderr
    assert [name for name, r in zip(HOSTILE, attacks, strict=True) if r.passed] == []
    assert all(r.outcome == "failed" for r in attacks)


def test_call_based_without_a_class_and_with_list_answers():
    code = HEADER + "def pair(xs):\n    return tuple(sorted(xs))\n"
    with using(SandboxPolicy("rlimits")):
        [result, missing] = run_io_tests(
            [code, HEADER + "def other(xs):\n    return xs\n"], "pair", ["[2, 1]"], ["[1, 2]"]
        )
    assert result.passed, result.stderr
    assert not missing.passed and "no function 'pair'" in missing.stderr
    with using(SandboxPolicy("rlimits")):
        [as_tuple, as_set] = run_io_tests(
            [HEADER + "def pair(xs):\n    return [tuple(xs)]\n",
             HEADER + "def pair(xs):\n    return set(xs)\n"],
            "pair", ["[1, 2]"], ["[[1, 2]]"],
        )  # fmt: skip
    # Python's `[(1, 2)] == [[1, 2]]` is False: a result that is not JSON is no answer.
    assert not as_tuple.passed and not as_set.passed


STDIO_INPUTS, STDIO_OUTPUTS = ["2\n", "5\n3 4\n"], ["4\n0.5", "10\n0.50  "]


def stdio(body: str) -> str:
    """A standard-input program as lighteval's make_function wraps it."""
    return "import sys\n\ndef wrapped_function():\n" + body


@pytest.mark.parametrize("mode", MODES)
def test_standard_input_checks_and_the_hostile_family(mode):
    programs = {
        "right": ("    n = int(input())\n    print(n * 2)\n    print(1 / 2)\n", True),
        "right, reading sys.stdin": (
            "    n = int(sys.stdin.read().split()[0])\n    print(n * 2)\n    print('0.500')\n",
            True,
        ),
        "right, then sys.exit(0) (ends the call only)": (
            "    n = int(input())\n    print(n * 2, 0.5, sep='\\n')\n    sys.exit(0)\n",
            True,
        ),
        "right, reading open(0)": (
            "    n = int(open(0).read().split()[0])\n    print(n * 2)\n    print(0.5)\n",
            True,
        ),
        "wrong": ("    print(1)\n    print(0.5)\n", False),
        "one line too many": (
            "    n = int(input())\n    print(n * 2)\n    print(0.5)\n    print()\n    print('x')\n",
            False,
        ),
        "exception": ("    raise ValueError(1)\n", False),
        "sys.exit(0) before a wrong answer": ("    print(1)\n    sys.exit(0)\n", False),
        "os._exit(0)": ("    import os\n    os._exit(0)\n", False),
        "atexit": (
            "    import atexit, os\n    atexit.register(lambda: os._exit(0))\n    print(1)\n",
            False,
        ),
        "excepthook": (
            "    import os\n    sys.excepthook = lambda *x: os._exit(0)\n    print(1)\n",
            False,
        ),
    }
    with using(SandboxPolicy(mode)):  # type: ignore[arg-type]
        results = run_io_tests(
            [stdio(body) for body, _ in programs.values()], None, STDIO_INPUTS, STDIO_OUTPUTS
        )
    verdicts = {name: r.passed for name, r in zip(programs, results, strict=True)}
    assert verdicts == {name: expected for name, (_, expected) in programs.items()}


def test_a_test_past_its_time_fails_and_inputs_must_match_outputs():
    with using(SandboxPolicy("rlimits")):
        [slow] = run_io_tests([stdio("    while True:\n        pass\n")], None, ["1"], ["1"], 1)
    assert not slow.passed and "the test ran past its time limit" in slow.stderr
    with pytest.raises(ValueError, match="2 inputs but 1 outputs"):
        run_io_tests(["x = 1"], None, ["1", "2"], ["1"])
