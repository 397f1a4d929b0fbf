"""Checkers of the `detectable_format:`, `detectable_content:`, `startend:` and `combination:`
families: the shape of the response rather than its words."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Self

from assay.errors import DataError
from assay.metrics.ifeval._checker_base import Checker, Draws, compile_arg, count_arg, text_arg

_PLACEHOLDER = re.compile(r"\[.*?\]")
_STAR_BULLET = re.compile(r"^\s*\*[^\*].*$", re.MULTILINE)
_DASH_BULLET = re.compile(r"^\s*-.*$", re.MULTILINE)
_HIGHLIGHT = re.compile(r"\*[^\n\*]*\*")
_DOUBLE_HIGHLIGHT = re.compile(r"\*\*[^\n\*]*\*\*")
_TITLE = re.compile(r"<<[^\n]+>>")
_CONSTRAINED_RESPONSES = ("My answer is yes.", "My answer is no.", "My answer is maybe.")
_SECTION_SPLITTERS = ("Section", "SECTION")
_POSTSCRIPT_MARKERS = ("P.S.", "P.P.S")
_POSTSCRIPT_PATTERNS = {"P.P.S": r"\s*p\.\s?p\.\s?s.*$", "P.S.": r"\s*p\.\s?s\..*$"}
_END_PHRASES = ("Any other questions?", "Is there anything else I can help with?")
_JSON_FENCES = ("```json", "```Json", "```JSON", "```")


@dataclass(frozen=True, slots=True)
class PlaceholderChecker(Checker):
    """detectable_content:number_placeholders: at least n [bracketed] placeholders."""

    ARGS = ("num_placeholders",)
    num_placeholders: float

    @classmethod
    def build(cls, rng: Draws, *, num_placeholders: Any = None) -> Self:
        return cls(count_arg("num_placeholders", num_placeholders, rng, 1, 4))

    def check(self, response: str) -> bool:
        return len(_PLACEHOLDER.findall(response)) >= self.num_placeholders


@dataclass(frozen=True, slots=True)
class PostscriptChecker(Checker):
    """detectable_content:postscript: a line holds the postscript marker (case-insensitive)."""

    ARGS = ("postscript_marker",)
    pattern: re.Pattern[str]

    @classmethod
    def build(cls, rng: Draws, *, postscript_marker: Any = None) -> Self:
        marker = text_arg("postscript_marker", postscript_marker)
        if marker is None:
            marker = rng.choice(_POSTSCRIPT_MARKERS)
        # The official code spells out P.S. and P.P.S loosely and uses any other marker as a
        # regex, unescaped.
        pattern = _POSTSCRIPT_PATTERNS.get(marker, r"\s*" + marker.lower() + r".*$")
        return cls(compile_arg("postscript_marker", pattern, re.MULTILINE))

    def check(self, response: str) -> bool:
        return self.pattern.search(response.lower()) is not None


@dataclass(frozen=True, slots=True)
class BulletListChecker(Checker):
    """detectable_format:number_bullet_lists: exactly n lines starting with '* ' or '-'."""

    ARGS = ("num_bullets",)
    num_bullets: float

    @classmethod
    def build(cls, rng: Draws, *, num_bullets: Any = None) -> Self:
        return cls(count_arg("num_bullets", num_bullets, rng, 1, 5))

    def check(self, response: str) -> bool:
        count = len(_STAR_BULLET.findall(response)) + len(_DASH_BULLET.findall(response))
        return count == self.num_bullets


@dataclass(frozen=True, slots=True)
class ConstrainedResponseChecker(Checker):
    """detectable_format:constrained_response: contains 'My answer is yes./no./maybe.'."""

    @classmethod
    def build(cls, rng: Draws) -> Self:
        return cls()

    def check(self, response: str) -> bool:
        response = response.strip()
        return any(option in response for option in _CONSTRAINED_RESPONSES)


@dataclass(frozen=True, slots=True)
class HighlightSectionChecker(Checker):
    """detectable_format:number_highlighted_sections: at least n non-blank *italic* or
    **bold** spans on one line."""

    ARGS = ("num_highlights",)
    num_highlights: float

    @classmethod
    def build(cls, rng: Draws, *, num_highlights: Any = None) -> Self:
        return cls(count_arg("num_highlights", num_highlights, rng, 1, 4))

    def check(self, response: str) -> bool:
        count = sum(1 for span in _HIGHLIGHT.findall(response) if span.strip("*").strip())
        count += sum(
            1
            for span in _DOUBLE_HIGHLIGHT.findall(response)
            if span.removeprefix("**").removesuffix("**").strip()
        )
        return count >= self.num_highlights


@dataclass(frozen=True, slots=True)
class SectionChecker(Checker):
    """detectable_format:multiple_sections: at least n sections marked '<splitter> <number>'."""

    ARGS = ("section_spliter", "num_sections")
    splitter: re.Pattern[str]
    num_sections: float

    @classmethod
    def build(cls, rng: Draws, *, section_spliter: Any = None, num_sections: Any = None) -> Self:
        splitter = text_arg("section_spliter", section_spliter)
        if splitter is None:
            splitter = rng.choice(_SECTION_SPLITTERS)
        return cls(
            splitter=compile_arg("section_spliter", r"\s?" + splitter + r"\s?\d+\s?"),
            num_sections=count_arg("num_sections", num_sections, rng, 1, 5),
        )

    def check(self, response: str) -> bool:
        return len(self.splitter.split(response)) - 1 >= self.num_sections


@dataclass(frozen=True, slots=True)
class JsonFormat(Checker):
    """detectable_format:json_format: the whole response parses as JSON (a ``` fence allowed)."""

    @classmethod
    def build(cls, rng: Draws) -> Self:
        return cls()

    def check(self, response: str) -> bool:
        value = response.strip()
        for fence in _JSON_FENCES:
            value = value.removeprefix(fence)
        value = value.removesuffix("```").strip()
        try:
            json.loads(value)
        except ValueError:
            return False
        return True


@dataclass(frozen=True, slots=True)
class TitleChecker(Checker):
    """detectable_format:title: a non-blank title in <<double angular brackets>>."""

    @classmethod
    def build(cls, rng: Draws) -> Self:
        return cls()

    def check(self, response: str) -> bool:
        return any(title.lstrip("<").rstrip(">").strip() for title in _TITLE.findall(response))


@dataclass(frozen=True, slots=True)
class TwoResponsesChecker(Checker):
    """combination:two_responses: two different non-empty answers separated by '******'."""

    @classmethod
    def build(cls, rng: Draws) -> Self:
        return cls()

    def check(self, response: str) -> bool:
        parts = response.split("******")
        answers = []
        for index, part in enumerate(parts):
            if part.strip():
                answers.append(part.strip())
            elif index not in (0, len(parts) - 1):
                return False
        return len(answers) == 2 and answers[0] != answers[1]


@dataclass(frozen=True, slots=True)
class RepeatPromptThenAnswer(Checker):
    """combination:repeat_prompt: starts with `prompt_to_repeat` (case-insensitive)."""

    ARGS = ("prompt_to_repeat",)
    prompt_to_repeat: str

    @classmethod
    def build(cls, rng: Draws, *, prompt_to_repeat: Any = None) -> Self:
        if not prompt_to_repeat:
            raise DataError("argument 'prompt_to_repeat' must be set (the request to repeat)")
        return cls(str(text_arg("prompt_to_repeat", prompt_to_repeat)).lower())

    def check(self, response: str) -> bool:
        return response.strip().lower().startswith(self.prompt_to_repeat)


@dataclass(frozen=True, slots=True)
class EndChecker(Checker):
    """startend:end_checker: ends with `end_phrase` (case-insensitive, ignoring outer quotes)."""

    ARGS = ("end_phrase",)
    end_phrase: str

    @classmethod
    def build(cls, rng: Draws, *, end_phrase: Any = None) -> Self:
        phrase = text_arg("end_phrase", end_phrase)
        if phrase is None:
            phrase = rng.choice(_END_PHRASES)
        return cls(phrase.strip().lower())

    def check(self, response: str) -> bool:
        return response.strip().strip('"').lower().endswith(self.end_phrase)


@dataclass(frozen=True, slots=True)
class QuotationChecker(Checker):
    """startend:quotation: wrapped in double quotation marks."""

    @classmethod
    def build(cls, rng: Draws) -> Self:
        return cls()

    def check(self, response: str) -> bool:
        response = response.strip()
        return len(response) > 1 and response[0] == '"' and response[-1] == '"'
