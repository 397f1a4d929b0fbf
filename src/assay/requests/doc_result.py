"""DocResult: one doc on its way through the pipeline, the record every stage after the
requests fills in (responses, filtered answers, verdicts, metric values) and results write."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from assay.doc import Doc
from assay.requests.instances import Instance
from assay.requests.types import Generation


@dataclass
class DocResult:
    """One evaluated doc: its instances, raw responses (per instance, per repeat) and metrics."""

    doc_id: int
    doc: Doc
    instances: list[Instance]
    resps: list[list[Any]]
    filtered: dict[str, list[Any]] = field(default_factory=dict)
    """Per filter name: the filtered value of each instance."""
    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per filter name: metric name -> per-sample value."""
    judged: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per filter name: judge metric name -> the judge's Judgement (the judge stage)."""
    executions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Per filter name: how each model-written program the metrics ran ended, in the order of
    the doc's responses (`SandboxResult.record()`; code tasks only)."""
    history: list[tuple[str, str]] = field(default_factory=list)
    """Docs with follow-up turns: the exchanges before the last, as (user turn, model answer);
    the last answer is the doc's response."""
    transcript: Any = None
    """Agent tasks: the sample's `agents.Transcript` (every turn, call and result)."""
    generations: dict[tuple[int, int], Generation] = field(default_factory=dict)
    """Per (instance, repeat) answered by a `Generation`: how it ended and what the model
    thought; `resps` holds the answer filters see."""

    @classmethod
    def of(cls, doc_id: int, doc: Doc, instances: list[Instance]) -> DocResult:
        """A doc with its requests, before any response."""
        return cls(doc_id, doc, instances, [[] for _ in instances])
