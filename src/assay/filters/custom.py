"""The `custom` filter: a user function over all docs' responses at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from assay.errors import ConfigError
from assay.filters.base import register_filter


@register_filter("custom")
class CustomFilter:
    """`filter_fn(resps, docs)` decides everything: its return value is the filtered list."""

    def __init__(self, filter_fn: Callable[[Sequence[Any], Sequence[dict[str, Any]]], Any]):
        if not callable(filter_fn):
            raise ConfigError(
                f"filter 'custom': filter_fn must be a function taking (resps, docs), got "
                f"{filter_fn!r}; in YAML write `filter_fn: !function module.function_name`"
            )
        self.filter_fn = filter_fn

    def apply(self, resps: Sequence[Any], docs: Sequence[dict[str, Any]]) -> list[Any]:
        """Whatever `filter_fn` returns, as a list."""
        return list(self.filter_fn(resps, docs))
