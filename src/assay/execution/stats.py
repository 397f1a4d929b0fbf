"""RunStats: how an executor call ran (requests, cache hits, tokens, batches).

Every executor returns its results as `Answers`: the results in the caller's order, plus the
statistics of the call, counted while the work plan was made and run, so nothing is tokenised
twice. A task adds up the statistics of its shards; results.json reports them per task.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from assay.models.api.usage_totals import api_usage_entry, usage_sum
from assay.requests.cache import ResponseCache
from assay.requests.types import Result

TokenUnit = Literal["tokens", "characters"]


@dataclass
class RunStats:
    """Counts of one executor call, or of several added up with `+=`."""

    requests: int = 0
    """Requests asked for, duplicates counted."""
    unique_requests: int = 0
    """Distinct requests (each computed or read once)."""
    from_cache: int = 0
    """Distinct requests answered by the response cache."""
    computed: int = 0
    """Distinct requests the backend computed."""
    token_unit: TokenUnit | None = None
    """Unit of the token counts: the backend's tokens, or characters when it counts none
    (None until a call measured anything)."""
    input_tokens: int = 0
    """Length of the distinct requests' texts (a loglikelihood's context and continuation)."""
    generated_tokens: int = 0
    """Length of the distinct generated texts."""
    batches: int = 0
    """Backend calls made (one per chunk of the work plan)."""
    batch_sizes: list[int] = field(default_factory=list)
    """Sizes the backend's automatic batch size picked during the call, in order."""
    prefix_cache: dict[str, int] = field(default_factory=dict)
    """The backend's prefix-reuse counters over the calls (`LM.prefix_cache_stats`)."""
    api_usage: dict[str, int | float | str | None] = field(default_factory=dict)
    scoring: dict[str, Any] = field(default_factory=dict)
    """How the backend chose to score loglikelihoods, as measured (`LM.scoring_choice`)."""
    """A paid API's requests, tokens and cost over the calls (`LM.usage_stats`)."""

    def __iadd__(self, other: RunStats) -> RunStats:
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if f.name == "api_usage":  # a cost may be unknown (None): not a plain sum
                self.api_usage = usage_sum([mine, theirs])
            elif f.name == "scoring":  # a measured choice, not a counter: the latest holds
                self.scoring = dict(theirs or mine)
            elif isinstance(mine, int):
                setattr(self, f.name, mine + theirs)
            elif isinstance(mine, list):
                mine.extend(theirs)
            elif isinstance(mine, dict):
                for key, value in theirs.items():
                    mine[key] = mine.get(key, 0) + value
        self.token_unit = other.token_unit or self.token_unit
        return self

    def counts(self) -> dict[str, Any]:
        """The task's "requests" entry of results.json."""
        out: dict[str, Any] = {
            "requests": self.requests,
            "unique_requests": self.unique_requests,
            "from_cache": self.from_cache,
            "computed": self.computed,
        }
        if self.token_unit is not None:
            out["token_unit"] = self.token_unit
            out["input_tokens"] = self.input_tokens
            out["generated_tokens"] = self.generated_tokens
        if self.prefix_cache:
            cache: dict[str, Any] = dict(self.prefix_cache)
            if cache.get("queries"):
                cache["hit_rate"] = round(cache.get("hits", 0) / cache["queries"], 4)
            out["prefix_cache"] = cache
        if self.api_usage:
            out["api"] = api_usage_entry(self.api_usage)
        if self.scoring:
            out["scoring"] = dict(self.scoring)
        return out


class Answers(list[Result]):
    """The results of an executor call, in the caller's order, with the call's `stats`."""

    def __init__(self, results: Iterable[Result], stats: RunStats) -> None:
        super().__init__(results)
        self.stats = stats


def counter_delta(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, int]:
    """What running counters added between two readings (empty without counters)."""
    if after is None:
        return {}
    return {key: value - (before or {}).get(key, 0) for key, value in after.items()}


def task_batch_sizes(task: str, chosen: list[int], cache: ResponseCache | None) -> list[int]:
    """The automatic batch sizes to report for `task`: those `chosen` while computing it, or,
    when it computed nothing new, those recorded in the cache by the run that did.

    lm-eval reports the sizes its batch_size=auto search picked in `config.batch_sizes`. A
    rerun or resume served from the response cache runs no batches, so the backend picks no
    size; reporting [] would make its results.json differ from the run that computed the
    answers. The sizes are therefore stored in the cache per task, next to the responses they
    produced, and reported again whenever those responses are reused.
    """
    if cache is None:
        return chosen
    if chosen:
        cache.record_batch_sizes(task, chosen)
        return chosen
    return cache.batch_sizes(task)


def collapse_repeats(sizes: list[int]) -> list[int]:
    """`sizes` without consecutive repeats: a backend records a size only when it changes."""
    return [size for i, size in enumerate(sizes) if i == 0 or size != sizes[i - 1]]
