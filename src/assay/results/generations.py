"""How a task's generations ended: the answer scored for each, and the rates results.json reports.

Backends may answer a generation request with a `Generation` (finish reason, thinking, token
counts). The run's --unclosed-thinking policy is applied here, in one place, when answers are
filed under their docs, so the response cache never depends on it. `GenerationTally` counts
what a task's generations did: how many hit the token cap (finish reason "length"), how many
ended while still thinking, and how long the thinking and the answers were.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from assay.requests.types import GenerateRequest, Generation

DOCS_PAGE = "docs/reasoning-models.md"
WARN_ABOVE = 0.05
"""A task whose truncated or unclosed share exceeds this gets a warning on stderr."""


def answer_seen(generation: Generation, policy: str) -> str:
    """The answer filters and metrics see under --unclosed-thinking `policy` ("empty" or
    "keep"; "fail" is enforced by the caller, which names the docs)."""
    if generation.thinking_closed is False and policy != "keep":
        return ""
    return generation.text


@dataclass
class GenerationTally:
    """What the generations of a task (or a group's tasks) did, counted as they are filed."""

    policy: str = "empty"
    """The run's --unclosed-thinking: what was scored for an unclosed generation."""
    generations: int = 0
    """Generations that reported how they ended (a `Generation`); plain strings say nothing."""
    finish_known: int = 0
    """Of those, the ones whose finish reason the backend gave."""
    truncated: int = 0
    """Finish reason "length": max_gen_toks (or a thinking budget) was reached first."""
    unclosed: int = 0
    """The thinking never closed."""
    cut_answers: int = 0
    """Truncated generations whose thinking (if any) had closed: scored on an answer cut
    short."""
    reasoning_tokens: list[int] = field(default_factory=list)
    answer_tokens: list[int] = field(default_factory=list)
    max_gen_toks: set[int] = field(default_factory=set)
    """The token caps in force for the truncated or unclosed generations."""

    def add(self, generation: Generation, request: Any) -> None:
        """Count one generation answering `request`."""
        self.generations += 1
        if generation.finish_reason is not None:
            self.finish_known += 1
        truncated = generation.finish_reason == "length"
        unclosed = generation.thinking_closed is False
        self.truncated += truncated
        self.unclosed += unclosed
        self.cut_answers += truncated and not unclosed
        if generation.reasoning_tokens is not None:
            self.reasoning_tokens.append(generation.reasoning_tokens)
        if generation.answer_tokens is not None:
            self.answer_tokens.append(generation.answer_tokens)
        if (truncated or unclosed) and isinstance(request, GenerateRequest):
            self.max_gen_toks.add(request.params.max_gen_toks)

    def merged(self, others: Sequence[GenerationTally]) -> GenerationTally:
        """This tally and `others` pooled (a group's tasks)."""
        out = GenerationTally(self.policy)
        for tally in (self, *others):
            out.generations += tally.generations
            out.finish_known += tally.finish_known
            out.truncated += tally.truncated
            out.unclosed += tally.unclosed
            out.cut_answers += tally.cut_answers
            out.reasoning_tokens += tally.reasoning_tokens
            out.answer_tokens += tally.answer_tokens
            out.max_gen_toks |= tally.max_gen_toks
        return out

    def entry(self) -> dict[str, Any]:
        """results.json's entry: counts, rates (None where nothing could be counted) and token
        statistics (None where the backend counted no tokens)."""
        return {
            "generations": self.generations,
            "finish_reason_known": self.finish_known,
            "truncated": self.truncated,
            "truncated_rate": _rate(self.truncated, self.finish_known),
            "unclosed_thinking": self.unclosed,
            "unclosed_thinking_rate": _rate(self.unclosed, self.generations),
            "reasoning_tokens_mean": _mean(self.reasoning_tokens),
            "reasoning_tokens_p95": p95(self.reasoning_tokens),
            "answer_tokens_mean": _mean(self.answer_tokens),
            "unclosed_thinking_policy": self.policy,
        }

    def warning(self, task: str, thinking_controls: Sequence[str] = ()) -> str | None:
        """A notice when more than 5 % of the generations were truncated or left thinking
        open, saying what was scored for them; None otherwise. `thinking_controls`: the
        running backend's model args that make its model think less (advised only where
        some thinking did not close)."""
        truncated = _rate(self.truncated, self.finish_known) or 0.0
        unclosed = _rate(self.unclosed, self.generations) or 0.0
        if max(truncated, unclosed) <= WARN_ABOVE:
            return None
        caps = ", ".join(str(c) for c in sorted(self.max_gen_toks)) or "unknown"
        said = []
        if self.truncated:
            cut = f"{self.cut_answers} scored on an answer cut short" if self.cut_answers else ""
            still = self.truncated - self.cut_answers
            thinking = f"{still} while still thinking" if still else ""
            which = "; ".join(part for part in (cut, thinking) if part)
            said.append(
                f"{truncated:.1%} of generations ({self.truncated} of {self.finish_known}) hit "
                f"the token cap ({which})"
            )
        if self.unclosed:
            scored = {
                "empty": "scored as empty answers",
                "keep": "scored on their unfinished thought (lm-eval's rule)",
                "fail": "refused",
            }[self.policy]
            said.append(
                f"{unclosed:.1%} ({self.unclosed} of {self.generations}) ended while still "
                f"thinking, {scored} (--unclosed-thinking {self.policy})"
            )
        advice = "Raise it (--gen-kwargs max_gen_toks=N)"
        if self.unclosed and thinking_controls:
            advice += f" or think less ({', '.join(thinking_controls)})"
        return (
            f"task {task}: {' and '.join(said)}; max_gen_toks in force: {caps}. {advice}; "
            f"see {DOCS_PAGE}."
        )


def p95(values: Sequence[int]) -> int | None:
    """The 95th percentile by the nearest-rank rule: the smallest value that at least 95 % of
    the values do not exceed (always a value that occurred); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[-(-95 * len(ordered) // 100) - 1]  # ceil(0.95 n), in whole numbers


def _rate(count: int, total: int) -> float | None:
    return count / total if total else None


def _mean(values: Sequence[int]) -> float | None:
    return sum(values) / len(values) if values else None


def generation_entries(
    tallies: dict[str, GenerationTally], group_subtasks: dict[str, list[str]]
) -> dict[str, dict[str, Any]]:
    """results.json's `assay.generations`: an entry per task whose generations reported how
    they ended, and per group over its tasks (pooled, not averaged), when any did. `tallies`
    holds every finished task, those without generations included."""
    out = {name: tally.entry() for name, tally in tallies.items() if tally.generations}

    def leaves(name: str) -> list[str]:
        if name not in group_subtasks:
            return [name]
        return [leaf for child in group_subtasks[name] for leaf in leaves(child)]

    for group in group_subtasks:
        members = leaves(group)
        if not all(leaf in tallies for leaf in members):
            continue  # written once all its tasks are done, as lm-eval's group numbers
        found = [tallies[leaf] for leaf in members]
        if any(t.generations for t in found):
            out[group] = found[0].merged(found[1:]).entry()
    return out
