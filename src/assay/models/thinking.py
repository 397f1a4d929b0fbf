"""A reasoning model's thinking, split from its answer the same way in every backend.

lm-eval keeps what follows the last end-of-thinking marker (`text.split(think_end)[-1]`,
left-stripped) and cuts it at the stop strings; a generation cut off before the marker is then
scored on its unfinished thought. `split_thinking` applies the same rule, and says what lm-eval
does not: whether the thinking closed, and how long each part was. The run's
--unclosed-thinking policy (results.generations) decides what an unclosed generation scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from assay.errors import ConfigError
from assay.models.base import cut_at_stops, stop_cut_reason
from assay.requests.types import FinishReason, Generation


@dataclass(frozen=True, slots=True)
class Thinking:
    """How a backend tells a model's thinking from its answer (its model args)."""

    end: str
    """The end-of-thinking marker as text (e.g. "</think>")."""
    start: str | None = None
    """The opening marker. Given, a generation thinks only when it starts with it or its
    prompt ends with it (a template that opens the block itself); None: every generation is
    taken to start in thinking, as lm-eval assumes once think_end_token is set."""
    budget: int | None = None
    """Thinking tokens allowed: a generation that thought for more is counted as unclosed."""

    def opened_by(self, prompt: str) -> bool:
        """Whether `prompt` (as rendered) leaves the model inside an open thinking block."""
        return self.start is not None and prompt.rstrip().endswith(self.start)


def thinking_args(
    backend: str, end: str | None, start: str | None, budget: int | None
) -> Thinking | None:
    """The Thinking of a backend's model args, or None without think_end_token; a start
    marker or budget without an end marker is refused (nothing could tell the thinking
    apart)."""
    if end is None:
        for name, value in (("think_start_token", start), ("thinking_budget", budget)):
            if value is not None:
                raise ConfigError(
                    f"--model {backend}: {name}={value} needs think_end_token=<the marker that "
                    "ends the thinking, e.g. </think>>; see docs/reasoning-models.md."
                )
        return None
    return Thinking(end, start, budget)


def split_thinking(
    raw: str,
    until: Sequence[str],
    thinking: Thinking | None,
    *,
    opened: bool = False,
    finish_reason: FinishReason | None = None,
    reasoning_tokens: int | None = None,
    answer_tokens: int | None = None,
) -> Generation:
    """A raw generation as a `Generation`: thinking apart, answer cut at `until`.

    `opened`: the prompt left the model inside a thinking block. `finish_reason` becomes
    "stop_sequence" when a stop string cuts the answer here (not an unclosed thought's). Token
    counts are the
    backend's (None when it does not count); `reasoning_tokens` is checked against the
    thinking budget.
    """
    if thinking is None:
        answer = cut_at_stops(raw, until)
        return Generation(
            answer,
            finish_reason=stop_cut_reason(finish_reason, raw, answer),
            answer_tokens=answer_tokens,
        )
    thinks = (
        opened
        or thinking.start is None
        or raw.lstrip().startswith(thinking.start)
        or thinking.end in raw  # a closing marker: it thought, whatever opened the block
    )
    if not thinks:
        answer = cut_at_stops(raw, until)
        return Generation(
            answer,
            finish_reason=stop_cut_reason(finish_reason, raw, answer),
            answer_tokens=answer_tokens,
        )
    reasoning, marker, _ = raw.rpartition(thinking.end)
    closed = bool(marker)
    if not closed:
        reasoning = raw
    over_budget = (
        thinking.budget is not None
        and reasoning_tokens is not None
        and reasoning_tokens > thinking.budget
    )
    uncut = raw.split(thinking.end)[-1].lstrip()
    answer = cut_at_stops(uncut, until)  # lm-eval's rule, closed or not (see Generation.text)
    return Generation(
        answer,
        reasoning=reasoning,
        # An unclosed thought ended as the generation did, whatever a stop string cut.
        finish_reason=stop_cut_reason(finish_reason, uncut, answer) if closed else finish_reason,
        thinking_closed=closed and not over_budget,
        reasoning_tokens=reasoning_tokens,
        # Thinking that never closed (or ran past its budget) leaves no answer tokens, whatever
        # lm-eval's rule scores; unknown counts stay unknown.
        answer_tokens=answer_tokens if (closed and not over_budget) or answer_tokens is None else 0,
    )
