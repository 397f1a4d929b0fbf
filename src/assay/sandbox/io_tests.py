"""Programs checked against input/output tests (LiveCodeBench's rules) in assay's sandbox.

A LiveCodeBench metric could run each generated program in a fork of the calling
process; assay runs each, with its tests' inputs, as one program in the run's `--sandbox`
instead (`_io_grader.py`, stdlib only, then a call holding the program and the inputs), and
compares the answers it reports with the expected outputs here, outside the sandbox. A program
passes only when it ran every test to the end (the bootstrap's nonce, `_child.py`: `sys.exit`,
`os._exit`, an atexit handler or a replaced excepthook end it without one) and every answer
is right; the expected outputs never reach the program, so nothing it does inside can make a
wrong answer right. The comparisons are LiveCodeBench's: call-based, the result equals the
JSON-decoded output; standard input, the printed output has as many lines as the expected one
(both stripped), each line equal, or equal as a list of Decimals.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from assay.sandbox import SandboxResult

TEST_TIMEOUT_S = 6
"""Seconds each test (and the program's own start) may take: LiveCodeBench's `timeout`."""

ANSWERS_MARKER = "\x00assay-io-answers "
"""Starts the line on which the checker reports the answers (`_io_grader.ANSWERS_MARKER`)."""

ANSWER_BYTES = 8 * 1024 * 1024
"""Standard output kept per program: the answers line must fit in it."""


@functools.cache
def _grader() -> str:
    return Path(__file__).with_name("_io_grader.py").read_text(encoding="utf-8")


def io_program(code: str, fn_name: str | None, inputs: Sequence[str], timeout: int) -> str:
    """The text run in the sandbox: the checker, then its call on `code` and the inputs."""
    call = f"answer({code!r}, {fn_name!r}, {list(inputs)!r}, {int(timeout)!r})"
    return f"{_grader()}\n\n{call}\n"


def run_io_tests(
    codes: Sequence[str],
    fn_name: str | None,
    inputs: Sequence[str],
    outputs: Sequence[str],
    timeout: int = TEST_TIMEOUT_S,
) -> list[SandboxResult]:
    """Run each program of `codes` on the tests (call-based when `fn_name` is given, else
    standard input and output); one result per program, in order, `passed` only when every
    answer was right. Each program gets LiveCodeBench's budget: (timeout + 1) seconds per
    test, plus 5."""
    from assay.sandbox import Limits, run_many
    from assay.sandbox.policy import record
    from assay.sandbox.programs import MEMORY_MB, STARTUP_S

    if len(inputs) != len(outputs):
        raise ValueError(f"io tests: {len(inputs)} inputs but {len(outputs)} outputs.")
    run_s = (timeout + 1) * len(inputs) + 5
    limits = Limits(
        timeout_s=run_s + STARTUP_S,
        run_s=run_s,
        memory_mb=MEMORY_MB,
        output_bytes=ANSWER_BYTES,
        output_kill_bytes=2 * ANSWER_BYTES,
    )
    unique = list(dict.fromkeys(codes))
    ran = run_many([io_program(code, fn_name, inputs, timeout) for code in unique], limits)
    judged = {code: _judge(r, fn_name, outputs) for code, r in zip(unique, ran, strict=True)}
    results = [judged[code] for code in codes]
    record(results)
    return results


def _judge(result: SandboxResult, fn_name: str | None, outputs: Sequence[str]) -> SandboxResult:
    """The run's result, failed unless it went to its end and every answer was right."""
    if not result.passed:
        return result
    marker = result.stdout.rfind(ANSWERS_MARKER)
    line = result.stdout[marker + len(ANSWERS_MARKER) :].split("\n", 1)[0] if marker >= 0 else ""
    try:
        answers = json.loads(line)
    except ValueError:
        return _failed(result, "no answers reported (output cut or replaced)")
    if not isinstance(answers, list) or len(answers) != len(outputs):
        return _failed(result, "the answers do not match the tests")
    for number, (got, want) in enumerate(zip(answers, outputs, strict=True)):
        right = _same_result(got, want) if fn_name is not None else _same_output(got, want)
        if not right:
            return _failed(result, f"test {number}: wrong {'result' if fn_name else 'output'}")
    return result


def _failed(result: SandboxResult, why: str) -> SandboxResult:
    return dataclasses.replace(result, passed=False, outcome="failed", detail=why)


def _same_result(got: object, want: str) -> bool:
    """LiveCodeBench's call-based test: the result equals the JSON-decoded expected output."""
    if not isinstance(got, str):
        return False
    try:
        return bool(json.loads(got) == json.loads(want))
    except ValueError:
        return False


def _decimals(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(part) for part in line.split()]
    except InvalidOperation:
        return None


def _same_output(printed: object, expected: str) -> bool:
    """LiveCodeBench's standard-input test: as many stripped lines, each equal or equal as a
    list of Decimals."""
    if not isinstance(printed, str):
        return False
    got = [line.strip() for line in printed.strip().split("\n")]
    want = [line.strip() for line in expected.strip().split("\n")]
    if len(got) != len(want):
        return False
    for a, b in zip(got, want, strict=True):
        if a == b:
            continue
        x, y = _decimals(a), _decimals(b)
        if x is None or y is None or x != y:
            return False
    return True
