"""Checkers of the `language:`, `change_case:` and `punctuation:` families."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from assay.errors import DataError
from assay.metrics.ifeval._checker_base import Checker, Draws, compare, count_arg, relation_arg
from assay.metrics.ifeval._langdetect import detect_language
from assay.metrics.ifeval._text import count_capital_words

LANGUAGE_CODES = {
    "en": "English",
    "es": "Spanish",
    "pt": "Portuguese",
    "ar": "Arabic",
    "hi": "Hindi",
    "fr": "French",
    "ru": "Russian",
    "de": "German",
    "ja": "Japanese",
    "it": "Italian",
    "bn": "Bengali",
    "uk": "Ukrainian",
    "th": "Thai",
    "ur": "Urdu",
    "ta": "Tamil",
    "te": "Telugu",
    "bg": "Bulgarian",
    "ko": "Korean",
    "pl": "Polish",
    "he": "Hebrew",
    "fa": "Persian",
    "vi": "Vietnamese",
    "ne": "Nepali",
    "sw": "Swahili",
    "kn": "Kannada",
    "mr": "Marathi",
    "gu": "Gujarati",
    "pa": "Punjabi",
    "ml": "Malayalam",
    "fi": "Finnish",
}
"""The ISO 639-1 codes IFEval's response_language instruction may ask for, in official order."""


def _is_language(text: str, code: str) -> bool:
    # The official checkers count text without any letters to judge by (langdetect's
    # "No features in text") as following the instruction.
    detected = detect_language(text)
    return detected is None or detected == code


@dataclass(frozen=True, slots=True)
class ResponseLanguageChecker(Checker):
    """language:response_language: langdetect finds the requested language."""

    ARGS = ("language",)
    language: str

    @classmethod
    def build(cls, rng: Draws, *, language: Any = None) -> Self:
        if language is None:
            language = rng.choice(list(LANGUAGE_CODES))
        if language not in LANGUAGE_CODES:
            raise DataError(
                f"argument 'language' must be one of {sorted(LANGUAGE_CODES)}, got {language!r}"
            )
        return cls(language)

    def check(self, response: str) -> bool:
        return _is_language(response, self.language)


@dataclass(frozen=True, slots=True)
class CapitalLettersEnglishChecker(Checker):
    """change_case:english_capital: all cased characters are upper case, and it is English."""

    @classmethod
    def build(cls, rng: Draws) -> Self:
        return cls()

    def check(self, response: str) -> bool:
        return response.isupper() and _is_language(response, "en")


@dataclass(frozen=True, slots=True)
class LowercaseLettersEnglishChecker(Checker):
    """change_case:english_lowercase: all cased characters are lower case, and it is English."""

    @classmethod
    def build(cls, rng: Draws) -> Self:
        return cls()

    def check(self, response: str) -> bool:
        return response.islower() and _is_language(response, "en")


@dataclass(frozen=True, slots=True)
class CapitalWordFrequencyChecker(Checker):
    """change_case:capital_word_frequency: all-capital words (nltk.word_tokenize tokens)
    occur less than / at least `capital_frequency` times."""

    ARGS = ("capital_frequency", "capital_relation")
    frequency: float
    relation: str

    @classmethod
    def build(
        cls, rng: Draws, *, capital_frequency: Any = None, capital_relation: Any = None
    ) -> Self:
        return cls(
            # Unlike the other thresholds, the official code keeps a negative one.
            frequency=count_arg(
                "capital_frequency", capital_frequency, rng, 1, 20, redraw_negative=False
            ),
            relation=relation_arg("capital_relation", capital_relation, rng),
        )

    def check(self, response: str) -> bool:
        return compare(count_capital_words(response), self.relation, self.frequency)


@dataclass(frozen=True, slots=True)
class CommaChecker(Checker):
    """punctuation:no_comma: no ',' at all."""

    @classmethod
    def build(cls, rng: Draws) -> Self:
        return cls()

    def check(self, response: str) -> bool:
        return "," not in response
