"""Filters, exactly as lm-eval defines them.

A filter maps responses to responses. Responses are 2-D: outer per doc, inner per repeat
(`resps[i]` is the list of the i-th doc's responses). Filters apply in sequence inside a
FilterEnsemble; a selection filter such as take_first turns each doc's list into one value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from assay.errors import ConfigError
from assay.registry import ComponentRegistry, describe_call


@runtime_checkable
class Filter(Protocol):
    """lm-eval's Filter: `apply(resps, docs)` over every doc of a task at once."""

    def apply(self, resps: Sequence[Any], docs: Sequence[dict[str, Any]]) -> list[Any]:
        """Filtered responses, one entry per doc, in order."""
        ...


FILTERS: ComponentRegistry[Callable[..., Filter]] = ComponentRegistry("filter", "assay.filters")


def register_filter(name: str) -> Callable[[Callable[..., Filter]], Callable[..., Filter]]:
    """Register a filter class or factory under `name` (as in a YAML `function:`)."""
    return FILTERS.register(name)


for _name, _module in {
    "take_first": "assay.filters.selection",
    "take_first_k": "assay.filters.selection",
    "majority_vote": "assay.filters.selection",
    "regex": "assay.filters.extraction",
    "multi_choice_regex": "assay.filters.extraction",
    "regex_pos": "assay.filters.extraction",
    "remove_whitespace": "assay.filters.transformation",
    "lowercase": "assay.filters.transformation",
    "uppercase": "assay.filters.transformation",
    "map": "assay.filters.transformation",
    "format_span": "assay.filters.transformation",
    "custom": "assay.filters.custom",
}.items():
    FILTERS.lazy(_name, _module)


@dataclass
class FilterEnsemble:
    """A named pipeline of filters; its name becomes the `,filter` suffix of metric keys."""

    name: str
    filters: list[Filter]
    description: list[str] = field(default_factory=list)
    """How each step was built, e.g. "regex(regex_pattern='#### (.*)')"."""

    def apply(self, resps: Sequence[Any], docs: Sequence[dict[str, Any]]) -> list[Any]:
        """Run every filter in order over all docs' responses."""
        out: list[Any] = list(resps)
        for step in self.filters:
            out = list(step.apply(out, docs))
        return out


def build_filter_ensemble(
    name: str, components: Sequence[tuple[str | Callable[..., Filter], dict[str, Any] | None]]
) -> FilterEnsemble:
    """Build a FilterEnsemble from (filter name or factory, kwargs) pairs, as lm-eval does."""
    steps: list[Filter] = []
    described: list[str] = []
    for function, kwargs in components:
        kwargs = dict(kwargs or {})
        factory = FILTERS.get(function) if isinstance(function, str) else function
        label = function if isinstance(function, str) else getattr(function, "__name__", "custom")
        try:
            steps.append(factory(**kwargs))
        except TypeError as exc:
            raise ConfigError(
                f"filter {label!r} in filter pipeline {name!r} does not accept {kwargs}: {exc}"
            ) from None
        described.append(describe_call(label, kwargs))
    return FilterEnsemble(name=name, filters=steps, description=described)
