"""Selection filters: choose which of a doc's repeated responses go on to scoring."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any

from assay.errors import ConfigError, DataError
from assay.filters.base import register_filter


@register_filter("take_first")
class TakeFirst:
    """Keep only each doc's first response; the per-doc list collapses to that one value."""

    def apply(self, resps: Sequence[Any], docs: Sequence[dict[str, Any]]) -> list[Any]:
        """The first response of every doc."""
        out = []
        for index, responses in enumerate(resps):
            if len(responses) == 0:
                raise DataError(
                    f"filter 'take_first': doc {index} has no responses to take; "
                    "check that the model returned an answer for every request"
                )
            out.append(responses[0])
        return out


@register_filter("take_first_k")
class TakeFirstK:
    """Keep each doc's first `k` responses (still a list per doc)."""

    def __init__(self, k: int) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ConfigError(
                f"filter 'take_first_k': k must be a non-negative integer, got {k!r}; "
                "set e.g. `k: 5` in the filter's arguments"
            )
        self.k = k

    def apply(self, resps: Sequence[Any], docs: Sequence[dict[str, Any]]) -> list[Any]:
        """The first k responses of every doc."""
        resps = list(resps)
        # Like lm-eval, only the first doc is checked: every doc is queried `repeats` times.
        if resps and len(resps[0]) < self.k:
            raise DataError(
                f"filter 'take_first_k': needs at least {self.k} responses per doc but doc 0 "
                f"has {len(resps[0])}; raise the task's `repeats` to at least {self.k}"
            )
        return [responses[: self.k] for responses in resps]


@register_filter("majority_vote")
class MajorityVote:
    """Each doc's most frequent response, as a one-element list; ties go to the first seen."""

    def apply(self, resps: Sequence[Any], docs: Sequence[dict[str, Any]]) -> list[list[Any]]:
        """[most common response] per doc."""
        out = []
        for index, responses in enumerate(resps):
            if len(responses) == 0:
                raise DataError(
                    f"filter 'majority_vote': doc {index} has no responses to vote on; "
                    "check that the model returned an answer for every request"
                )
            out.append([_most_common(responses)])
        return out


def _most_common(responses: Sequence[Hashable]) -> Hashable:
    counts = Counter(responses)
    # max() keeps the first maximal key and a Counter iterates in first-seen order, which is
    # exactly how Counter.most_common(1) breaks ties.
    return max(counts, key=counts.__getitem__)
