"""Episodes: agent loops whose conversation the task drives itself.

A plain agent task offers fixed tools and ends when the model answers without calling one. An
episode (`AgentSpec.episode`) is for benchmarks with their own turn structure, such as BFCL's
multi-turn categories: several user turns, each ending when the model stops calling tools;
tools that change between turns; calls run against the benchmark's own simulated APIs; and a
step limit per user turn. The loop (`run.agents`) still asks every model turn through the
response cache and keeps the transcript; the episode says what the model is offered, what its
calls return, and when the next user turn comes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from assay.agents.tools import ToolOutcome
from assay.requests.tools import ToolCall, ToolSpec, Turn
from assay.requests.types import Generation


@dataclass(frozen=True)
class Reply:
    """What an episode makes of one model turn.

    `results` answers the turn's calls, one per call in order (empty when none were run);
    `user` is the next user turn's messages when the model's turn closed a user turn (the
    loop adds them after the results); `stop` ends the loop: "answer" when the conversation
    is over, or the name of a limit the episode enforces."""

    results: Sequence[tuple[ToolCall, ToolOutcome]] = ()
    user: tuple[Turn, ...] = ()
    tools_added: tuple[str, ...] = ()
    """Names of the tools offered from this user turn on that were not offered before."""
    results_message: Turn | None = None
    """When set, the results go back to the model as this one message (a prompt-mode loop,
    whose model calls tools in its text and is offered none), not as one `tool` message per
    call; the transcript still records each result."""
    stop: str | None = None


class Episode(Protocol):
    """One doc's conversation, driven by its task (see the module)."""

    def tools(self) -> tuple[ToolSpec, ...]:
        """The tools offered with the next model turn."""
        ...

    def reply(self, answer: Generation) -> Reply:
        """Run what the model's turn calls and say what comes next."""
        ...

    def close(self) -> None:
        """Release what the episode holds (simulated APIs); called once the loop ends."""
        ...


class EpisodeFactory(Protocol):
    """Starts a doc's episode from the doc's `specific` fields (`Doc.specific`)."""

    def __call__(self, specific: dict[str, object]) -> Episode: ...
