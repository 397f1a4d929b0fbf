"""Reaching the official `bfcl-eval` package, which scores BFCL answers.

bfcl-eval pins numpy 1.26.4 and other packages that clash with assay's environment: it lives
in an environment of its own (`make bfcl-venv`), and is imported only when a BFCL task is
validated or an answer scored.

It also holds the guard on bfcl-eval's Python decoder (`refuse_evaluated_code`), which both
the single-turn checker (`metrics.bfcl`) and the multi-turn prompt mode
(`metrics.bfcl_multi_turn`) apply before that decoder sees a text.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from assay.errors import ConfigError

INSTALL_HINT = (
    "BFCL is scored by the official bfcl-eval package, which pins numpy 1.26.4 and so lives in "
    "an environment of its own: `make bfcl-venv` builds .venv-bfcl (bfcl-eval==2026.3.23 with "
    "assay), then run assay with .venv-bfcl/bin/python -m assay."
)


def bfcl_eval_module(name: str) -> Any:
    """A module of bfcl-eval, or a ConfigError that says how to install it."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(f"{INSTALL_HINT} (import {name} failed: {exc})") from None


@dataclass(frozen=True, slots=True)
class Verdict:
    """bfcl-eval's verdict on one answer: valid, and when not, its error type and messages."""

    valid: bool
    error_type: str = ""
    errors: tuple[str, ...] = ()


class UnsafeAnswer(ValueError):
    """A prompt-mode answer that bfcl-eval's decoder would run as Python code."""


_SAFE_IN_ARITHMETIC = (ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop)
_LARGEST = 10.0**100
"""The largest value an evaluated argument may reach."""
_LONGEST_TEXT = 10.0**6
"""The longest text an evaluated argument may reach ("ab" * 3)."""


def refuse_evaluated_code(text: str) -> None:
    """Raise UnsafeAnswer when bfcl-eval's Python decoder would `eval` more than bounded
    arithmetic on constants.

    Its decoder evaluates every binary operation of an argument (`a=60*60*24`) with `eval`, so
    a model could run any code through it (`a=__import__("os").system(...)+1`) or exhaust the
    machine (`a=9**9**9`, `a="x"*10**12`). Such an answer is judged as one that does not decode
    (see docs/bfcl.md); arithmetic on constants whose values stay below 10**100 (texts below a
    million characters) decodes as bfcl-eval decodes it."""
    cleaned = text.strip("`\n ")
    cleaned = ("" if cleaned.startswith("[") else "[") + cleaned
    cleaned += "" if cleaned.endswith("]") else "]"
    try:
        tree = ast.parse(cleaned.strip().strip("'"), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return  # bfcl-eval cannot parse it either: nothing is evaluated
    for node in ast.walk(tree):
        if not isinstance(node, ast.BinOp):
            continue
        if not all(isinstance(part, _SAFE_IN_ARITHMETIC) for part in ast.walk(node)):
            raise UnsafeAnswer(f"not evaluated: model-written code {ast.unparse(node)[:80]!r}")
        texts = any(
            isinstance(part, ast.Constant) and isinstance(part.value, str | bytes)
            for part in ast.walk(node)
        )
        if _bound(node) > (_LONGEST_TEXT if texts else _LARGEST):
            raise UnsafeAnswer(f"not evaluated: a huge value {ast.unparse(node)[:80]!r}")


def _bound(node: ast.AST) -> float:
    """An upper bound of an arithmetic expression's magnitude (a text's length), computed
    without evaluating it: inf when it may be huge."""
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool | int | float | complex):
            return float(abs(value)) if abs(value) < _LARGEST else float("inf")
        return float(len(value)) if isinstance(value, str | bytes) else float("inf")
    if isinstance(node, ast.UnaryOp):
        return _bound(node.operand) + 1  # ~x is -x-1
    if not isinstance(node, ast.BinOp):
        return float("inf")
    left, right = _bound(node.left), _bound(node.right)
    if max(left, right) > _LARGEST:
        return float("inf")
    if isinstance(node.op, ast.Add | ast.Sub | ast.BitOr | ast.BitXor | ast.BitAnd):
        return left + right
    if isinstance(node.op, ast.Mult | ast.MatMult):
        return max(left, 1.0) * max(right, 1.0)
    if isinstance(node.op, ast.Pow):
        return max(left, 2.0) ** right if right <= 400 else float("inf")
    if isinstance(node.op, ast.LShift):
        return left * 2.0**right if right <= 400 else float("inf")
    return max(left, right, 1.0)  # / // % >>: no larger than the dividend (or 1/divisor)
