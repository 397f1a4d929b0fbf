"""The 25 IFEval instruction ids, their checkers, and which instructions conflict."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from assay.metrics.ifeval import _checkers_case as case
from assay.metrics.ifeval import _checkers_format as fmt
from assay.metrics.ifeval import _checkers_keywords as keywords
from assay.metrics.ifeval import _checkers_length as length
from assay.metrics.ifeval._checker_base import Checker

INSTRUCTION_DICT: Mapping[str, type[Checker]] = MappingProxyType(
    {
        "keywords:existence": keywords.KeywordChecker,
        "keywords:frequency": keywords.KeywordFrequencyChecker,
        "keywords:forbidden_words": keywords.ForbiddenWords,
        "keywords:letter_frequency": keywords.LetterFrequencyChecker,
        "language:response_language": case.ResponseLanguageChecker,
        "length_constraints:number_sentences": length.NumberOfSentences,
        "length_constraints:number_paragraphs": length.ParagraphChecker,
        "length_constraints:number_words": length.NumberOfWords,
        "length_constraints:nth_paragraph_first_word": length.ParagraphFirstWordCheck,
        "detectable_content:number_placeholders": fmt.PlaceholderChecker,
        "detectable_content:postscript": fmt.PostscriptChecker,
        "detectable_format:number_bullet_lists": fmt.BulletListChecker,
        "detectable_format:constrained_response": fmt.ConstrainedResponseChecker,
        "detectable_format:number_highlighted_sections": fmt.HighlightSectionChecker,
        "detectable_format:multiple_sections": fmt.SectionChecker,
        "detectable_format:json_format": fmt.JsonFormat,
        "detectable_format:title": fmt.TitleChecker,
        "combination:two_responses": fmt.TwoResponsesChecker,
        "combination:repeat_prompt": fmt.RepeatPromptThenAnswer,
        "startend:end_checker": fmt.EndChecker,
        "change_case:capital_word_frequency": case.CapitalWordFrequencyChecker,
        "change_case:english_capital": case.CapitalLettersEnglishChecker,
        "change_case:english_lowercase": case.LowercaseLettersEnglishChecker,
        "punctuation:no_comma": case.CommaChecker,
        "startend:quotation": fmt.QuotationChecker,
    }
)
"""Instruction id -> checker class, in the official order."""

_ALL = frozenset(INSTRUCTION_DICT)

INSTRUCTION_CONFLICTS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "keywords:existence": frozenset({"keywords:existence"}),
        "keywords:frequency": frozenset({"keywords:frequency"}),
        "keywords:forbidden_words": frozenset({"keywords:forbidden_words"}),
        "keywords:letter_frequency": frozenset({"keywords:letter_frequency"}),
        "language:response_language": frozenset(
            {
                "language:response_language",
                "detectable_format:multiple_sections",
                "keywords:existence",
                "keywords:frequency",
                "keywords:forbidden_words",
                "startend:end_checker",
                "change_case:english_capital",
                "change_case:english_lowercase",
            }
        ),
        "length_constraints:number_sentences": frozenset({"length_constraints:number_sentences"}),
        "length_constraints:number_paragraphs": frozenset(
            {
                "length_constraints:number_paragraphs",
                "length_constraints:nth_paragraph_first_word",
                "length_constraints:number_sentences",
            }
        ),
        "length_constraints:number_words": frozenset({"length_constraints:number_words"}),
        "length_constraints:nth_paragraph_first_word": frozenset(
            {
                "length_constraints:nth_paragraph_first_word",
                "length_constraints:number_paragraphs",
            }
        ),
        "detectable_content:number_placeholders": frozenset(
            {"detectable_content:number_placeholders"}
        ),
        "detectable_content:postscript": frozenset({"detectable_content:postscript"}),
        "detectable_format:number_bullet_lists": frozenset(
            {"detectable_format:number_bullet_lists"}
        ),
        "detectable_format:constrained_response": _ALL,
        "detectable_format:number_highlighted_sections": frozenset(
            {"detectable_format:number_highlighted_sections"}
        ),
        "detectable_format:multiple_sections": frozenset(
            {
                "detectable_format:multiple_sections",
                "language:response_language",
                "detectable_format:number_highlighted_sections",
            }
        ),
        "detectable_format:json_format": _ALL - {"keywords:forbidden_words", "keywords:existence"},
        "detectable_format:title": frozenset({"detectable_format:title"}),
        "combination:two_responses": _ALL
        - {
            "keywords:forbidden_words",
            "keywords:existence",
            "language:response_language",
            "detectable_format:title",
            "punctuation:no_comma",
        },
        "combination:repeat_prompt": _ALL
        - {"keywords:existence", "detectable_format:title", "punctuation:no_comma"},
        "startend:end_checker": frozenset({"startend:end_checker"}),
        "change_case:capital_word_frequency": frozenset(
            {
                "change_case:capital_word_frequency",
                "change_case:english_lowercase",
                "change_case:english_capital",
            }
        ),
        "change_case:english_capital": frozenset({"change_case:english_capital"}),
        "change_case:english_lowercase": frozenset(
            {"change_case:english_lowercase", "change_case:english_capital"}
        ),
        "punctuation:no_comma": frozenset({"punctuation:no_comma"}),
        "startend:quotation": frozenset({"startend:quotation", "detectable_format:title"}),
    }
)
"""Instruction id -> the ids that should not be combined with it in one prompt (as listed
officially: not symmetric, used when composing prompts, never when scoring)."""
