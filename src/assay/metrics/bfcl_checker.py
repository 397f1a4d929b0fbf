"""Reaching the official `bfcl-eval` package, which scores BFCL answers.

bfcl-eval pins numpy 1.26.4 and other packages that clash with assay's environment: it lives
in an environment of its own (`make bfcl-venv`), and is imported only when a BFCL task is
validated or an answer scored.
"""

from __future__ import annotations

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
