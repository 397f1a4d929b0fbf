"""Extraction filters: pull the answer out of free text with regular expressions.

Each filter maps every response of every doc (the per-repeat lists are kept) to the extracted
string, or to the filter's fallback when nothing matches. Patterns are compiled when the filter
is built, so a bad pattern is reported before any model runs.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Sequence
from functools import cache
from typing import Any

from assay.errors import ConfigError, DataError
from assay.filters.base import register_filter

GSM8K_ANSWER = r"#### (\-?[0-9\.\,]+)"
"""lm-eval's default pattern: the number after GSM8K's '####' marker."""


def _compile(filter_name: str, field: str, pattern: Any) -> re.Pattern[str]:
    if not isinstance(pattern, str):
        raise ConfigError(
            f"filter {filter_name!r}: {field} must be a regular expression string, "
            f"got {type(pattern).__name__}"
        )
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ConfigError(
            f"filter {filter_name!r}: {field} {pattern!r} is not a valid regular expression "
            f"({exc}); fix the pattern (in YAML, prefer single quotes so backslashes survive)"
        ) from None


def _check_index(filter_name: str, group_select: Any) -> int:
    if isinstance(group_select, bool) or not isinstance(group_select, int):
        raise ConfigError(
            f"filter {filter_name!r}: group_select must be an integer index into the list of "
            f"matches (0 = first, -1 = last), got {group_select!r}"
        )
    return group_select


def _nth(found: list[Any], index: int) -> Any | None:
    """found[index], or None when the response has too few matches.

    lm-eval raises IndexError there and aborts the run; assay treats it as "no match".
    """
    return found[index] if -len(found) <= index < len(found) else None


@register_filter("regex")
class RegexFilter:
    """The `group_select`-th match of `regex_pattern` in each response, stripped.

    With several capture groups a match is a tuple and its first non-empty group is used.
    Non-string responses are searched as "". No match gives `fallback`.
    """

    name = "regex"

    def __init__(
        self,
        regex_pattern: str = GSM8K_ANSWER,
        group_select: int = 0,
        fallback: Any = "[invalid]",
    ) -> None:
        self.regex_pattern = regex_pattern
        self.regex = _compile(self.name, "regex_pattern", regex_pattern)
        self.group_select = _check_index(self.name, group_select)
        self.fallback = fallback

    def apply(self, resps: Sequence[Any], docs: Sequence[dict[str, Any]]) -> list[list[Any]]:
        """Extracted answers, one list per doc."""
        return [[self.extract(resp) for resp in responses] for responses in resps]

    def extract(self, resp: Any) -> Any:
        """The answer in one response, or the fallback."""
        found = self.regex.findall(resp if isinstance(resp, str) else "")
        match = _nth(found, self.group_select)
        if match is None:
            return self.fallback
        if isinstance(match, tuple):
            match = next((group for group in match if group), self.fallback)
        # A fallback chosen for an all-empty tuple is stripped too, as in lm-eval.
        return match.strip() if isinstance(match, str) else match


@cache
def _unicode_punctuation() -> dict[int, None]:
    """Translation table deleting every Unicode punctuation character (categories P*)."""
    return {
        code: None
        for code in range(sys.maxunicode)
        if unicodedata.category(chr(code)).startswith("P")
    }


@register_filter("multi_choice_regex")
class MultiChoiceRegexFilter(RegexFilter):
    """Letter answer "(A)", "(B)", ... of a multiple-choice question asked generatively.

    Three attempts per response, the first that yields a non-empty string wins:
    1. `regex_pattern`, as in the `regex` filter (the result is kept as extracted);
    2. the literal text of a choice from `doc["choices"]`, compared after the ignore options
       (`regexes_to_ignore` removed, then lower-cased, then Unicode punctuation removed), mapped
       to its letter; longer choices are tried first so "Guilty" cannot shadow "Guilty of X";
    3. a bare letter after a colon (": B"), mapped to "(B)".
    Otherwise `fallback`. `group_select` picks the match in every attempt.
    """

    name = "multi_choice_regex"

    def __init__(
        self,
        regex_pattern: str = GSM8K_ANSWER,
        group_select: int = 0,
        fallback: Any = "[invalid]",
        ignore_case: bool = False,
        ignore_punctuation: bool = False,
        regexes_to_ignore: Sequence[str] | None = None,
    ) -> None:
        super().__init__(regex_pattern, group_select, fallback)
        self.ignore_case = ignore_case
        self.ignore_punctuation = ignore_punctuation
        if regexes_to_ignore is not None and (
            isinstance(regexes_to_ignore, str) or not isinstance(regexes_to_ignore, Sequence)
        ):
            raise ConfigError(
                f"filter {self.name!r}: regexes_to_ignore must be a list of patterns, "
                f"got {regexes_to_ignore!r}; write it as a YAML list"
            )
        self.ignored = [
            _compile(self.name, "regexes_to_ignore entry", pattern)
            for pattern in regexes_to_ignore or []
        ]

    def apply(self, resps: Sequence[Any], docs: Sequence[dict[str, Any]]) -> list[list[Any]]:
        """Letter answers, one list per doc."""
        if len(resps) != len(docs):
            raise DataError(
                f"filter {self.name!r}: got {len(resps)} response lists for {len(docs)} docs"
            )
        return [
            self._apply_doc(responses, doc, index)
            for index, (responses, doc) in enumerate(zip(resps, docs))
        ]

    def _apply_doc(self, responses: Sequence[Any], doc: dict[str, Any], index: int) -> list[Any]:
        try:
            choices = doc["choices"]
        except (KeyError, TypeError):
            raise DataError(
                f"filter {self.name!r}: doc {index} has no 'choices' field; add the list of "
                "answer texts to each doc (e.g. in process_docs)"
            ) from None
        letters = [chr(ord("A") + i) for i in range(len(choices))]
        text_to_letter: dict[str, str] = {}
        for letter, choice in zip(letters, choices):
            text_to_letter[self._normalise(choice.strip())] = f"({letter})"
        # The alternation is built from the normalised choices in their original order (so a
        # duplicate keeps every branch), then sorted longest-first.
        branches = [re.escape(self._normalise(choice.strip())) for choice in choices]
        choice_regex = re.compile("|".join(sorted(branches, key=len, reverse=True)))
        letter_regex = re.compile(r":[\s]*(" + "|".join(map(re.escape, letters)) + ")")
        letter_to_target = {letter: f"({letter})" for letter in letters}

        out = []
        for resp in responses:
            text = resp if isinstance(resp, str) else ""
            answer = (
                self._find(self.regex, text, {})
                or self._find(choice_regex, self._normalise(text), text_to_letter)
                or self._find(letter_regex, text, letter_to_target)
                or self.fallback
            )
            out.append(answer)
        return out

    def _find(self, regex: re.Pattern[str], text: str, convert: dict[str, str]) -> str:
        match = _nth(regex.findall(text), self.group_select)
        if match is None:
            return ""
        if isinstance(match, tuple):
            match = next((group for group in match if group), "")
        match = match.strip()
        return convert.get(match, match) if match else match

    def _normalise(self, text: str) -> str:
        for regex in self.ignored:
            text = regex.sub("", text)
        if self.ignore_case:
            text = text.lower()
        if self.ignore_punctuation:
            text = text.translate(_unicode_punctuation())
        return text


@register_filter("regex_pos")
class PosTagFilter:
    """Part-of-speech tags from a response that prints a list of ('token', 'TAG') pairs.

    A string response is scanned for ('token', 'TAG') pairs; any other response is taken to
    be an iterable of (token, tag) pairs already. No tags gives `fallback`. Like lm-eval, the
    pair pattern is fixed: `regex_pattern` and `group_select` are accepted (and checked) only so
    lm-eval task files load unchanged.
    """

    name = "regex_pos"
    _PAIR = re.compile(r"\('([^']*)', '([^']*)'\)")

    def __init__(
        self,
        regex_pattern: str = r"\['(.*?)'\]",
        group_select: int = 0,
        fallback: Any = None,
    ) -> None:
        self.regex_pattern = regex_pattern
        _compile(self.name, "regex_pattern", regex_pattern)
        self.group_select = _check_index(self.name, group_select)
        self.fallback = ["invalid"] if fallback is None else fallback

    def apply(self, resps: Sequence[Any], docs: Sequence[dict[str, Any]]) -> list[list[Any]]:
        """Tag lists, one list per doc."""
        return [[self.tags(resp) for resp in responses] for responses in resps]

    def tags(self, resp: Any) -> Any:
        """The tags of one response, or the fallback."""
        pairs = self._PAIR.findall(resp) if isinstance(resp, str) else resp
        return [tag for _, tag in pairs] or self.fallback
