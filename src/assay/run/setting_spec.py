"""How a run setting is declared: what it changes (`Effect`), how `assay run` spells it
(`Flag`) and its declaration (`Setting`, made by `declare` as a `RunSettings` field)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from assay.run.setting_checks import Check


class Effect(StrEnum):
    """What a setting changes; it decides where the setting is recorded (`meaning` says how)."""

    NUMBERS = "numbers"
    NUMERICS = "numerics"
    IDENTITY = "identity"
    FILES = "files"
    NOTHING = "nothing"

    @property
    def meaning(self) -> str:
        """What settings of this effect change, and where they are recorded."""
        return _MEANINGS[self]


_MEANINGS = {
    Effect.NUMBERS: "what the model is asked or how its answers are scored: written to "
    "results.json's provenance settings, and part of the run's identity (a run with another "
    "value is another run)",
    Effect.NUMERICS: "floating-point noise at most (kernels and batch shapes): written to "
    "results.json's provenance settings, since it can explain a last-digit difference, but not "
    "part of the run's identity, so a run resumed with another batch size or device is the same "
    "run",
    Effect.IDENTITY: "the model and the seeds: part of the run's identity, written in blocks of "
    "their own (the backend's identity, `seeds`)",
    Effect.FILES: "what the output files hold, not the numbers: part of the run's identity only",
    Effect.NOTHING: "where and how fast the run goes, where it is reported, what it may spend: "
    "neither recorded among the settings nor part of the run's identity",
}


@dataclass(frozen=True)
class Flag:
    """How `assay run` spells a setting."""

    names: tuple[str, ...]
    """The flag and its aliases, long form first ("--limit", "-L")."""
    argparse: dict[str, Any]
    """Keyword arguments of argparse's add_argument beside dest and help (action, metavar;
    `default` only where the flag's differs from the setting's). No `type` or `choices`: the
    parser hands the text over as typed, and the setting's check converts and refuses it."""


@dataclass(frozen=True)
class Setting:
    """One run setting's declaration: its help, what it changes, its flag and its check."""

    help: str
    effect: Effect
    flag: Flag | None
    """None: the Python API alone sets it."""
    check: Check | None = None
    """The conversion every value given for the setting goes through; None: taken as given."""
    executor: bool = False
    """Whether it says where requests run (--executor and the Ray pool's settings), which
    `Experiment` takes too."""


def declare(
    value: Any,
    effect: Effect,
    help: str,
    *flags: str,
    check: Check | None = None,
    executor: bool = False,
    **argparse: Any,
) -> Any:
    """A RunSettings field declared with everything that uses it; a list or dict default is
    given as its type (list, dict) and built fresh for each instance."""
    spec = Setting(help, effect, Flag(flags, argparse) if flags else None, check, executor)
    if value in (list, dict):
        return field(default_factory=value, metadata={"setting": spec})
    return field(default=value, metadata={"setting": spec})
