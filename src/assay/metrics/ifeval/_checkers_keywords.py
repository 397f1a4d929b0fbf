"""Checkers of the `keywords:` family: which words and letters the response uses."""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Any, Self

from assay.errors import DataError
from assay.metrics.ifeval._checker_base import (
    Checker,
    Draws,
    compare,
    compile_arg,
    count_arg,
    draw_keywords,
    relation_arg,
    text_arg,
    text_list_arg,
)


@dataclass(frozen=True, slots=True)
class KeywordChecker(Checker):
    """keywords:existence: every keyword occurs (case-insensitive; keywords are regexes)."""

    ARGS = ("keywords",)
    patterns: tuple[re.Pattern[str], ...]

    @classmethod
    def build(cls, rng: Draws, *, keywords: Any = None) -> Self:
        words = text_list_arg("keywords", keywords) if keywords else draw_keywords(rng, 2)
        return cls(tuple(compile_arg("keywords", word, re.IGNORECASE) for word in sorted(words)))

    def check(self, response: str) -> bool:
        return all(pattern.search(response) for pattern in self.patterns)


@dataclass(frozen=True, slots=True)
class KeywordFrequencyChecker(Checker):
    """keywords:frequency: the keyword occurs less than / at least `frequency` times."""

    ARGS = ("keyword", "frequency", "relation")
    pattern: re.Pattern[str]
    frequency: float
    relation: str

    @classmethod
    def build(
        cls, rng: Draws, *, keyword: Any = None, frequency: Any = None, relation: Any = None
    ) -> Self:
        word = (text_arg("keyword", keyword) or "") if keyword else draw_keywords(rng, 1)[0]
        return cls(
            pattern=compile_arg("keyword", word, re.IGNORECASE),
            frequency=count_arg("frequency", frequency, rng, 1, 3),
            relation=relation_arg("relation", relation, rng),
        )

    def check(self, response: str) -> bool:
        return compare(len(self.pattern.findall(response)), self.relation, self.frequency)


@dataclass(frozen=True, slots=True)
class ForbiddenWords(Checker):
    """keywords:forbidden_words: no forbidden word occurs as a whole word (case-insensitive)."""

    ARGS = ("forbidden_words",)
    patterns: tuple[re.Pattern[str], ...]

    @classmethod
    def build(cls, rng: Draws, *, forbidden_words: Any = None) -> Self:
        if forbidden_words:
            words = list(set(text_list_arg("forbidden_words", forbidden_words)))
        else:
            words = draw_keywords(rng, 2)
        return cls(
            tuple(
                compile_arg("forbidden_words", rf"\b{word}\b", re.IGNORECASE)
                for word in sorted(words)
            )
        )

    def check(self, response: str) -> bool:
        return not any(pattern.search(response) for pattern in self.patterns)


@dataclass(frozen=True, slots=True)
class LetterFrequencyChecker(Checker):
    """keywords:letter_frequency: a letter occurs less than / at least `let_frequency` times.

    A `letter` that is not one ASCII letter (the dataset has '#' and '!') is replaced by a
    letter drawn from `rng`, as the official code does with its global random generator.
    """

    ARGS = ("letter", "let_frequency", "let_relation")
    letter: str
    frequency: float
    relation: str

    @classmethod
    def build(
        cls,
        rng: Draws,
        *,
        letter: Any = None,
        let_frequency: Any = None,
        let_relation: Any = None,
    ) -> Self:
        if letter is not None and not isinstance(letter, str):
            raise DataError(f"argument 'letter' must be a string, got {letter!r}")
        if not letter or len(letter) > 1 or not _is_ascii_letter(letter.lower()):
            letter = rng.choice(string.ascii_letters)
        return cls(
            letter=letter.lower(),
            frequency=count_arg("let_frequency", let_frequency, rng, 1, 10),
            relation=relation_arg("let_relation", let_relation, rng),
        )

    def check(self, response: str) -> bool:
        return compare(response.lower().count(self.letter), self.relation, self.frequency)


def _is_ascii_letter(char: str) -> bool:
    # lower() may lengthen a character ('İ'); the official ord() check would then crash.
    return len(char) == 1 and "a" <= char <= "z"
