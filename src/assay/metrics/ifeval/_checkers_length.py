"""Checkers of the `length_constraints:` family: sentences, words and paragraphs."""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass
from typing import Any, Self

from assay.errors import DataError
from assay.metrics.ifeval._checker_base import (
    Checker,
    Draws,
    compare,
    count_arg,
    draw_keywords,
    relation_arg,
    text_arg,
)
from assay.metrics.ifeval._text import count_sentences, count_words

_MARKDOWN_DIVIDER = re.compile(r"\s?\*\*\*\s?")
_FIRST_WORD_STOPS = frozenset(".,?!'\"")


@dataclass(frozen=True, slots=True)
class NumberOfSentences(Checker):
    """length_constraints:number_sentences: Punkt sentences less than / at least a number."""

    ARGS = ("num_sentences", "relation")
    num_sentences: float
    relation: str

    @classmethod
    def build(cls, rng: Draws, *, num_sentences: Any = None, relation: Any = None) -> Self:
        return cls(
            num_sentences=count_arg("num_sentences", num_sentences, rng, 1, 20),
            relation=relation_arg("relation", relation, rng),
        )

    def check(self, response: str) -> bool:
        return compare(count_sentences(response), self.relation, self.num_sentences)


@dataclass(frozen=True, slots=True)
class NumberOfWords(Checker):
    r"""length_constraints:number_words: \w+ runs less than / at least a number."""

    ARGS = ("num_words", "relation")
    num_words: float
    relation: str

    @classmethod
    def build(cls, rng: Draws, *, num_words: Any = None, relation: Any = None) -> Self:
        return cls(
            num_words=count_arg("num_words", num_words, rng, 100, 500),
            relation=relation_arg("relation", relation, rng),
        )

    def check(self, response: str) -> bool:
        return compare(count_words(response), self.relation, self.num_words)


@dataclass(frozen=True, slots=True)
class ParagraphChecker(Checker):
    """length_constraints:number_paragraphs: exactly n paragraphs separated by '***'.

    Empty text before the first or after the last divider is not a paragraph; an empty
    paragraph anywhere else fails the instruction.
    """

    ARGS = ("num_paragraphs",)
    num_paragraphs: float

    @classmethod
    def build(cls, rng: Draws, *, num_paragraphs: Any = None) -> Self:
        return cls(count_arg("num_paragraphs", num_paragraphs, rng, 1, 5))

    def check(self, response: str) -> bool:
        paragraphs = _MARKDOWN_DIVIDER.split(response)
        count = len(paragraphs)
        for index, paragraph in enumerate(paragraphs):
            if not paragraph.strip():
                if index not in (0, len(paragraphs) - 1):
                    return False
                count -= 1
        return count == self.num_paragraphs


@dataclass(frozen=True, slots=True)
class ParagraphFirstWordCheck(Checker):
    r"""length_constraints:nth_paragraph_first_word: exactly n paragraphs separated by '\n\n',
    and paragraph `nth_paragraph` (from 1) starts with `first_word` (case-insensitive, leading
    quotes and anything from the first punctuation mark on ignored)."""

    ARGS = ("num_paragraphs", "nth_paragraph", "first_word")
    num_paragraphs: float
    nth_paragraph: int
    first_word: str

    @classmethod
    def build(
        cls,
        rng: Draws,
        *,
        num_paragraphs: Any = None,
        nth_paragraph: Any = None,
        first_word: Any = None,
    ) -> Self:
        count = count_arg("num_paragraphs", num_paragraphs, rng, 1, 5)
        nth = count_arg("nth_paragraph", nth_paragraph, rng, 1, int(count) + 1)
        if not isinstance(nth, numbers.Integral):
            raise DataError(f"argument 'nth_paragraph' must be an integer, got {nth_paragraph!r}")
        if nth <= 0 or nth > count:
            nth = rng.randint(1, int(count) + 1)
        word = text_arg("first_word", first_word, strip=False)
        if word is None:
            word = draw_keywords(rng, 1)[0]
        return cls(num_paragraphs=count, nth_paragraph=nth, first_word=word.lower())

    def check(self, response: str) -> bool:
        paragraphs = response.split("\n\n")
        count = len(paragraphs) - sum(1 for paragraph in paragraphs if not paragraph.strip())
        if self.nth_paragraph > count:
            return False
        paragraph = paragraphs[self.nth_paragraph - 1].strip()
        if not paragraph:
            return False
        word = paragraph.split()[0].strip().lstrip("'").lstrip('"')
        first_word = ""
        for char in word:
            if char in _FIRST_WORD_STOPS:
                break
            # Character by character, as the official code lowers it.
            first_word += char.lower()
        return count == self.num_paragraphs and first_word == self.first_word
