"""The report's agent transcripts: each agent sample's loop, turn by turn, and its filters.

`transcript_fields` adds to a sample's view (report.py's sample browser) the transcript of
its loop as the samples file holds it (the prompt, each assistant turn with its text, calls
and their arguments, tokens and seconds, each tool result and whether it failed) and three
facts the browser filters on: how many calls failed, the limit that ended the loop (None when
the model answered), and whether a final-answer metric scored 0. `transcripts_script()` is the
page's code that draws them (`transcripts_script`, report_transcripts.js inlined at the
page's `/*TRANSCRIPTS_JS*/` marker). Everything a model or a tool wrote is put in the page as text
(`textContent`), never as markup, so it stays inert whatever it holds.
"""

from __future__ import annotations

import math
from importlib import resources
from typing import Any

from assay.results.schema import SampleRecord, sample_metric_values

LOOP_METRICS = frozenset({"tool_call_match", "end_state"})
"""Metrics that score the loop (calls made, state left) rather than the final answer."""


def transcript_fields(record: SampleRecord) -> dict[str, Any]:
    """The record's transcript and its filter facts for the sample browser; nothing for a
    record of a task that is not an agent task."""
    raw: Any = record
    transcript = raw.get("transcript")
    if not isinstance(transcript, dict):
        return {}
    turns = transcript.get("turns")
    turns = turns if isinstance(turns, list) else []
    failed = sum(
        1 for t in turns if isinstance(t, dict) and t.get("role") == "tool" and t.get("error")
    )
    stopped = transcript.get("stopped_by")
    return {
        "transcript": transcript,
        "agent": {
            "failed_calls": failed,
            "hit_limit": stopped if stopped not in (None, "answer") else None,
            "wrong_answer": _wrong_answer(sample_metric_values(record)),
        },
    }


def _wrong_answer(values: dict[str, Any]) -> bool | None:
    """Whether a metric of the final answer scored 0 (None: the record has no such metric
    with a number)."""
    scores = [
        float(v)
        for name, v in values.items()
        if name not in LOOP_METRICS and isinstance(v, int | float) and math.isfinite(v)
    ]
    return None if not scores else any(score == 0 for score in scores)


def transcripts_script() -> str:
    """The page's code that draws transcripts (report_transcripts.js), safe to inline in a
    <script> element."""
    source = resources.files("assay.results").joinpath("report_transcripts.js")
    # "</script" inside the element would end it.
    return source.read_text("utf-8").replace("</script", "<\\/script")
