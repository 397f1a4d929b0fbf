"""Runs one program on input/output tests inside the sandbox and reports its answers (stdlib
only).

The text assay runs is this file followed by one call, `answer(...)`, holding the program and
the tests' inputs as literals (`assay.sandbox.io_tests`); the expected outputs never enter the
sandbox: assay compares the answers itself, so a program that digs into this interpreter or
rewrites this file's functions can change only its own answers, which it could have printed
anyway. The runs follow LiveCodeBench's own grading rules:

- call-based (a function name is given): the program is executed as a module; its function
  (a method of a `Solution()` instance when the code defines `class Solution`) is called on
  each test's arguments (one JSON value per line of the input); its result, a tuple read as a
  list, is the answer (JSON; none when the result holds anything but JSON's own types, which
  no expected output, JSON-decoded, could equal);
- standard input (no function name): the program, already wrapped in `wrapped_function`, is
  called once per test with `sys.stdin` reading the test's input (and `open` returning it); what
  it printed is the answer; a `SystemExit` inside it ends that call, not the run.

Each test, and the program's execution, gets `timeout` seconds (SIGALRM). The first test that
raises or runs out of time ends the run with status 1 and a line saying why; when every test
ran, one line goes to stdout (ANSWERS_MARKER, then the answers as JSON) and `answer` returns,
so the bootstrap (`_child.py`) records that the run went to its end.
"""

import io
import json
import os
import signal
import sys
from contextlib import ExitStack, redirect_stdout
from unittest import mock

ANSWERS_MARKER = "\x00assay-io-answers "
_exit, _write, _dumps, _loads, _StringIO = os._exit, os.write, json.dumps, json.loads, io.StringIO
_alarm, _list, _tuple, _isinstance = signal.alarm, list, tuple, isinstance


class _Timeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Timeout("the test ran past its time limit")


def _fail(why):
    _write(2, ("assay io run failed: " + why[:300] + "\n").encode(errors="replace"))
    _exit(1)


def _with_input(text):
    """What a call reads as its input: sys.stdin (and `open`) give `text`, as LiveCodeBench's
    patches leave them."""
    stack = ExitStack()
    lines = iter(text.split("\n"))
    # LiveCodeBench patches readline, readlines and read of the stdin in place before it
    # replaces sys.stdin by a StringIO of the input; the same order, the same effect.
    stack.enter_context(mock.patch("sys.stdin.read", lambda *a: text))
    stack.enter_context(mock.patch("sys.stdin.readlines", lambda *a: text.split("\n")))
    stack.enter_context(mock.patch("sys.stdin.readline", lambda *a: next(lines)))
    stack.enter_context(mock.patch("sys.stdin", _StringIO(text)))
    stack.enter_context(mock.patch("builtins.open", mock.mock_open(read_data=text)))
    return stack


def answer(code, fn_name, inputs, timeout):
    """Run `code`, then every test; print the answers and return (see the module's doc)."""
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(50000)
    signal.signal(signal.SIGALRM, _on_alarm)
    namespace = {"__name__": "tmp_sol"}
    _alarm(timeout)
    try:
        exec(code, namespace)
    finally:
        _alarm(0)
    if fn_name is None:
        answers = _run_stdio(namespace.get("wrapped_function"), inputs, timeout)
    else:
        target = namespace["Solution"]() if "class Solution" in code else None
        method = getattr(target, fn_name, None) if target is not None else namespace.get(fn_name)
        answers = _run_calls(method, fn_name, inputs, timeout)
    sys.stdout.flush()
    _write(1, ("\n" + ANSWERS_MARKER + _dumps(answers) + "\n").encode())


def _run_calls(method, fn_name, inputs, timeout):
    if method is None:
        _fail(f"no function {fn_name!r}")
    answers = []
    for text in inputs:
        args = [_loads(line) for line in text.split("\n")]
        _alarm(timeout)
        try:
            got = method(*args)
        finally:
            _alarm(0)
        if _isinstance(got, _tuple):
            got = _list(got)
        # Only a value made of JSON's own types can equal a JSON-decoded expectation; any
        # other (a nested tuple, a set, a dict with int keys) is answered as none at all.
        answers.append(_dumps(got) if _native(got) else None)
    return answers


def _native(value, depth=0):
    if depth > 100:
        return False
    if value is None or _isinstance(value, (str, int, float)):
        return True
    if _isinstance(value, _list):
        return all(_native(item, depth + 1) for item in value)
    if _isinstance(value, dict):
        return all(_isinstance(k, str) and _native(v, depth + 1) for k, v in value.items())
    return False


def _run_stdio(method, inputs, timeout):
    if method is None:
        _fail("no program to call")
    answers = []
    for given in inputs:
        text = "\n".join(given) if _isinstance(given, _list) else given
        printed = _StringIO()
        with redirect_stdout(printed), _with_input(text):
            _alarm(timeout)
            try:
                method()
            except SystemExit:
                pass
            finally:
                _alarm(0)
        answers.append(printed.getvalue())
    return answers
