"""Transformation filters: rewrite each response (per doc, per repeat) without choosing any."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from assay.errors import ConfigError, DataError
from assay.filters.base import register_filter


def _map_text(filter_name: str, resps: Sequence[Any], fn: Callable[[str], Any]) -> list[list[Any]]:
    """Apply `fn` to every response, which must be text."""
    out = []
    for index, responses in enumerate(resps):
        row = []
        for resp in responses:
            if not isinstance(resp, str):
                raise DataError(
                    f"filter {filter_name!r}: doc {index} has a {type(resp).__name__} response, "
                    "but this filter rewrites text; place it before filters that turn text into "
                    "other values (map, regex_pos, custom)"
                )
            row.append(fn(resp))
        out.append(row)
    return out


@register_filter("remove_whitespace")
class RemoveWhitespace:
    """Strip leading and trailing whitespace."""

    def apply(self, resps: Sequence[Any], docs: Sequence[dict[str, Any]]) -> list[list[Any]]:
        """Stripped responses, one list per doc."""
        return _map_text("remove_whitespace", resps, str.strip)


@register_filter("lowercase")
class Lowercase:
    """Lower-case every response."""

    def apply(self, resps: Sequence[Any], docs: Sequence[dict[str, Any]]) -> list[list[Any]]:
        """Lower-cased responses, one list per doc."""
        return _map_text("lowercase", resps, str.lower)


@register_filter("uppercase")
class Uppercase:
    """Upper-case every response."""

    def apply(self, resps: Sequence[Any], docs: Sequence[dict[str, Any]]) -> list[list[Any]]:
        """Upper-cased responses, one list per doc."""
        return _map_text("uppercase", resps, str.upper)


@register_filter("map")
class MapValues:
    """Replace each response by `mapping_dict[response]`, or `default_value` if absent."""

    def __init__(self, mapping_dict: dict[Any, Any] | None = None, default_value: Any = None):
        if mapping_dict is None:
            mapping_dict = {}
        if not isinstance(mapping_dict, dict):
            raise ConfigError(
                f"filter 'map': mapping_dict must be a mapping from response to value, got "
                f"{type(mapping_dict).__name__}; write it as a YAML mapping (key: value)"
            )
        self.mapping_dict = mapping_dict
        self.default_value = default_value

    def apply(self, resps: Sequence[Any], docs: Sequence[dict[str, Any]]) -> list[list[Any]]:
        """Mapped responses, one list per doc."""
        return [
            [self.mapping_dict.get(resp, self.default_value) for resp in responses]
            for responses in resps
        ]


# Label spellings models use for named-entity types, in the order they are rewritten.
_NER_LABELS = {
    "person": "PER",
    "location": "LOC",
    "organization": "ORG",
    "counties": "LOC",
    "places": "LOC",
    "people": "PER",
    "persons": "PER",
    "company": "ORG",
    "country": "LOC",
    "continent": "LOC",
    "time": "DATE",
    "date": "DATE",
    "per": "PER",
    "loc": "LOC",
    "org": "ORG",
}
_NER_LABEL_RULES = [
    (re.compile(rf"\b{re.escape(spelling)}\s*:"), f"{label}:")
    for spelling, label in _NER_LABELS.items()
]
_NER_ENTRY = re.compile(r"\b(PER|LOC|ORG|DATE):\s*([^$]+)")


@register_filter("format_span")
class FormatSpan:
    """Normalise a named-entity answer to "per: ent $ loc: ent ...".

    The text is lower-cased; label spellings before a colon ("Person:", "country:") become
    PER/LOC/ORG/DATE; entries are split on newlines and "$$"; comma-separated entities become
    separate "label: entity" items; "none" entities are dropped.
    """

    def apply(self, resps: Sequence[Any], docs: Sequence[dict[str, Any]]) -> list[list[Any]]:
        """Formatted entity lists, one list per doc."""
        return _map_text("format_span", resps, _format_entities)


def _format_entities(text: str) -> str:
    text = text.lower()
    # Only the label token before a ":" is rewritten, never entity text.
    for pattern, replacement in _NER_LABEL_RULES:
        text = pattern.sub(replacement, text)
    text = text.replace("$$", "$").rstrip("$")
    text = text.replace("\n", "$").strip()
    items = []
    for label, values in _NER_ENTRY.findall(text):
        for entity in (value.strip() for value in values.split(",")):
            if entity.lower() != "none":
                items.append(f"{label.lower()}: {entity}")
    return " $ ".join(items)
