"""`json.dumps(value, indent=2, ensure_ascii=False)`, written without json's Python encoder.

lm-eval's doc hash is the sha256 of a row's JSON with `indent=2`, and json writes indented text
with its pure-Python encoder (the C one takes no indent before Python 3.13): about 80 µs for a
HellaSwag row, most of the doc hash. This writes the same text directly for values made of the
exact types JSON holds (str, int, float, bool, None, list, tuple and dict with keys json accepts),
with json's own C string escaper and its number spellings (`int.__repr__`, `float.__repr__`,
NaN and +-Infinity).

Anything else anywhere in the value (a subclass of one of those types, a numpy scalar, an image
left to the caller's `default`, a structure deeper than `MAX_DEPTH`, which is how a circular one
shows) raises `NotPlain`, and the caller writes the whole value with `json.dumps`: the text is
json's own either way.
"""

from __future__ import annotations

from json.encoder import encode_basestring
from typing import Any

INDENT = "  "
MAX_DEPTH = 200
"""Containers nested deeper than this are left to json.dumps (which detects circular ones)."""

_INFINITY = float("inf")
_float_repr = float.__repr__
_int_repr = int.__repr__


class NotPlain(Exception):
    """The value holds something only json.dumps (with its `default`) writes exactly."""


def _float(value: float) -> str:
    # json.encoder's floatstr with allow_nan=True.
    if value != value:
        return "NaN"
    if value == _INFINITY:
        return "Infinity"
    if value == -_INFINITY:
        return "-Infinity"
    return _float_repr(value)


def _key(key: Any) -> str:
    """A dict key as json converts it to a string, in json's order of checks."""
    kind = type(key)
    if kind is str:
        return key
    if kind is float:
        return _float(key)
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if kind is int:
        return _int_repr(key)
    raise NotPlain


def _text(value: Any, newline: str) -> str:
    """The text of `value`, whose own lines start at `newline` ("\\n" and its indent)."""
    kind = type(value)
    if kind is str:
        return encode_basestring(value)
    if kind is dict:
        if not value:
            return "{}"
        if len(newline) > MAX_DEPTH * len(INDENT):
            raise NotPlain
        inner = newline + INDENT
        items = [
            encode_basestring(key if type(key) is str else _key(key))
            + ": "
            + (encode_basestring(item) if type(item) is str else _text(item, inner))
            for key, item in value.items()
        ]
        return "{" + inner + ("," + inner).join(items) + newline + "}"
    if kind is list or kind is tuple:
        if not value:
            return "[]"
        if len(newline) > MAX_DEPTH * len(INDENT):
            raise NotPlain
        inner = newline + INDENT
        items = [
            encode_basestring(item) if type(item) is str else _text(item, inner) for item in value
        ]
        return "[" + inner + ("," + inner).join(items) + newline + "]"
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is int:
        return _int_repr(value)
    if kind is float:
        return _float(value)
    raise NotPlain


def indented(value: Any) -> str:
    """`json.dumps(value, indent=2, ensure_ascii=False)`, or NotPlain (see the module doc)."""
    return _text(value, "\n")
