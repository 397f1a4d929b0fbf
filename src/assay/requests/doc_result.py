"""The records a doc's stages return: `AskedDoc` (a doc with its requests), `DocAnswers` (what
the model said to it) and `DocResult` (everything the samples file and the aggregates read).

Each is frozen: a stage returns a new value instead of filling in a shared record, and the
run's shard collector (`run.shard`) assembles them, so a record never changes after the stage
that made it (the containers it holds are not to be changed either)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from assay.doc import Doc
from assay.requests.instances import Instance
from assay.requests.types import Generation


@dataclass(frozen=True, kw_only=True)
class AskedDoc:
    """One doc of a shard with the requests built for it."""

    doc_id: int
    doc: Doc
    instances: list[Instance]


@dataclass(frozen=True, kw_only=True)
class DocAnswers:
    """What the model said to one doc: the value of the answering, follow-up and agent stages."""

    resps: list[list[Any]]
    """Per instance, per repeat: the answer as filters see it."""
    generations: Mapping[tuple[int, int], Generation] = field(default_factory=dict)
    """Per (instance, repeat) answered by a `Generation` with metadata: how it ended and what
    the model thought."""
    history: list[tuple[str, str]] = field(default_factory=list)
    """Docs with follow-up turns: the exchanges before the last, as (user turn, model answer);
    the last answer is the doc's response."""
    transcript: Any = None
    """Agent tasks: the sample's `agents.Transcript` (every turn, call and result)."""


@dataclass(frozen=True, kw_only=True)
class DocResult:
    """One evaluated doc: its instances, raw responses (per instance, per repeat), filtered
    answers, verdicts and metric values, as the shard collector assembled them."""

    doc_id: int
    doc: Doc
    instances: list[Instance]
    resps: list[list[Any]]
    generations: Mapping[tuple[int, int], Generation] = field(default_factory=dict)
    """As `DocAnswers.generations`; `resps` holds the answer filters see."""
    history: list[tuple[str, str]] = field(default_factory=list)
    """As `DocAnswers.history`."""
    transcript: Any = None
    """As `DocAnswers.transcript`."""
    filtered: Mapping[str, list[Any]] = field(default_factory=dict)
    """Per filter name: the filtered value of each instance."""
    judged: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Per filter name: judge metric name -> the judge's Judgement (the judge stage)."""
    values: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Per filter name: metric name -> per-sample value."""
    executions: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Per filter name: how each model-written program the metrics ran ended, in the order of
    the doc's responses (`SandboxResult.record()`; code tasks only)."""

    @classmethod
    def of(cls, asked: AskedDoc, answers: DocAnswers) -> DocResult:
        """A doc with its answers, before filters."""
        return cls(
            doc_id=asked.doc_id,
            doc=asked.doc,
            instances=asked.instances,
            resps=answers.resps,
            generations=answers.generations,
            history=answers.history,
            transcript=answers.transcript,
        )
