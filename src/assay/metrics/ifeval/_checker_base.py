"""What every IFEval instruction checker is, and the argument rules they share.

A checker is an immutable value built once from an instruction's keyword arguments (the
official `build_description`) and then asked `check(response)` (the official
`check_following`). Where the official code draws a missing or invalid argument at random,
the checker draws it from the `Draws` it is given, which scoring seeds (see
`scoring.RANDOM_SEED`), so a response always gets the same verdict.
"""

from __future__ import annotations

import numbers
import random
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar, cast

from assay.errors import DataError
from assay.metrics.ifeval._resources import word_list

LESS_THAN = "less than"
AT_LEAST = "at least"
RELATIONS = (LESS_THAN, AT_LEAST)
T = TypeVar("T")
"""The official comparison relations, in the order the official code draws from."""


class Draws:
    """The random draws a checker may make, from a `random.Random` seeded on first use.

    Most checkers draw nothing, and seeding a generator costs more than most checks.
    """

    def __init__(self, seed: str) -> None:
        self._seed = seed
        self._rng: random.Random | None = None

    def _generator(self) -> random.Random:
        if self._rng is None:
            self._rng = random.Random(self._seed)
        return self._rng

    def choice(self, options: Sequence[T]) -> T:
        """One of `options`."""
        return self._generator().choice(options)

    def randint(self, low: int, high: int) -> int:
        """An integer in [low, high]."""
        return self._generator().randint(low, high)

    def sample(self, population: Sequence[T], count: int) -> list[T]:
        """`count` distinct members of `population`."""
        return self._generator().sample(population, k=count)


class Checker(ABC):
    """One instruction's verifier (subclasses are frozen dataclasses)."""

    ARGS: ClassVar[tuple[str, ...]] = ()
    """Keyword arguments `build` accepts (the official `get_instruction_args_keys`)."""

    build: ClassVar[Callable[..., Checker]]
    """`build(rng, **kwargs)`, a classmethod of each checker: the checker from the instruction's
    kwargs (its own ARGS, each a keyword), drawing missing values from `rng`."""

    @abstractmethod
    def check(self, response: str) -> bool:
        """Whether `response` follows the instruction."""


def relation_arg(name: str, value: Any, rng: Draws) -> str:
    """A comparison relation: drawn when missing, otherwise 'less than' or 'at least'."""
    if value is None:
        return rng.choice(RELATIONS)
    if value not in RELATIONS:
        raise DataError(f"argument {name!r} must be one of {list(RELATIONS)}, got {value!r}")
    return value


def count_arg(
    name: str,
    value: Any,
    rng: Draws,
    low: int,
    high: int,
    *,
    redraw_negative: bool = True,
) -> int | float:
    """A threshold: drawn from [low, high] when missing (or negative, for all official checkers
    but capital_word_frequency)."""
    if value is None:
        return rng.randint(low, high)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise DataError(f"argument {name!r} must be a number, got {value!r}")
    number = cast(float, value)  # a Real that is not a bool: an int or a float in practice
    return rng.randint(low, high) if redraw_negative and number < 0 else number


def text_arg(name: str, value: Any, *, strip: bool = True) -> str | None:
    """An optional string argument, stripped unless told otherwise (None stays None)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise DataError(f"argument {name!r} must be a string, got {value!r}")
    return value.strip() if strip else value


def text_list_arg(name: str, value: Any) -> list[str]:
    """A list of strings."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise DataError(f"argument {name!r} must be a list of strings, got {value!r}")
    if not all(isinstance(item, str) for item in value):
        raise DataError(f"argument {name!r} must be a list of strings, got {value!r}")
    return list(value)


def compile_arg(name: str, pattern: str, flags: int = 0) -> re.Pattern[str]:
    """Compile a pattern built from an argument: the official code uses arguments as regexes."""
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise DataError(
            f"argument {name!r} gives the regular expression {pattern!r}, which does not "
            f"compile ({exc}); the official checker uses it as a regex, unescaped"
        ) from exc


def draw_keywords(rng: Draws, count: int) -> list[str]:
    """`count` distinct words of the official keyword list (its generate_keywords)."""
    return rng.sample(word_list(), count)


def compare(count: float, relation: str, threshold: float) -> bool:
    """count < threshold for 'less than', count >= threshold for 'at least'."""
    return count < threshold if relation == LESS_THAN else count >= threshold
