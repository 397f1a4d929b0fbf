"""Whether a question's choices run behind one context pass: a stored calibration, or timed live.

Packing a doc's choices behind one pass of their shared context (`hf.score`) computes fewer
tokens, but each row then carries a 4-D mask and, on some devices and model sizes, attention
over it costs more than recomputing the context per choice. Nothing here is assumed:

- By default the choice is read from `choice_calibration.json`, shipped with the package and
  written by `benchmarks/choice_calibration.py`, which times both ways on real models: a row
  per device kind and model size bucket. The same device and model always get the same choice,
  so repeated runs, and a run and its Ray replicas, give the same bits. A device or size no row
  covers packs (fewer tokens), and the record says that it was not measured.
- With ASSAY_MEASURE_CHOICE_PACKING=1, the first call with such docs scores a few of them both
  ways, times each, and the cheaper way scores the rest of the run.

Either way the choice and what it rests on are kept for results.json
(`assay.requests.<task>.scoring`).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

MEASURE_ENV = "ASSAY_MEASURE_CHOICE_PACKING"
"""Set to 1 to measure and apply the choice. Off by default: the two ways agree only within
float noise (about 1e-7), and a choice that follows the machine's timing would let two runs of
one command (or a run and its Ray replicas) differ in the last bits; until the choice comes
from a stored calibration, every default run packs, as before."""


def measure_choice_packing() -> bool:
    """Whether scorers measure and apply the choice (ASSAY_MEASURE_CHOICE_PACKING=1)."""
    return os.environ.get(MEASURE_ENV, "0").strip() == "1"


MEASURED_DOCS = 8
"""Docs (contexts with two or more multi-token choices) timed both ways, at most: those of the
first call with any (a run with batch_size 1 calls the backend with one doc at a time)."""


@dataclass(frozen=True)
class ChoicePacking:
    """The measured choice between one context pass per doc and one pass per choice."""

    context_once: bool
    """Whether a doc's choices share one pass of its context."""
    measured_docs: int
    context_once_seconds: float
    """Time to score the measured docs with their choices packed behind one context."""
    per_choice_seconds: float
    """Time to score the same docs with the context recomputed for each choice."""
    context_once_tokens: int
    """Tokens those passes computed (prefix cache positions excluded), packed."""
    per_choice_tokens: int
    """The same, one row per choice."""
    device: str
    parameters: int
    row: dict[str, object] | None = None
    """The calibration row the choice was read from (None: measured on this run)."""

    @classmethod
    def of(
        cls,
        timings: tuple[float, float],
        tokens: tuple[int, int],
        measured_docs: int,
        device: str,
        parameters: int,
    ) -> ChoicePacking:
        """The choice from (packed, per-choice) seconds and tokens: the faster way wins; a tie
        keeps the packed way, which computes fewer tokens."""
        packed_s, single_s = timings
        return cls(
            context_once=packed_s <= single_s,
            measured_docs=measured_docs,
            context_once_seconds=round(packed_s, 6),
            per_choice_seconds=round(single_s, 6),
            context_once_tokens=tokens[0],
            per_choice_tokens=tokens[1],
            device=device,
            parameters=parameters,
        )

    def as_dict(self) -> dict[str, object]:
        """Plain values for results.json: the choice, and the table row or the run's timings."""
        if self.row is None:
            measured = {k: v for k, v in asdict(self).items() if k != "row"}
            return {"backend": "hf", "source": "measured on this run", **measured}
        return {
            "backend": "hf",
            "source": "calibration table",
            "context_once": self.context_once,
            "device": self.device,
            "parameters": self.parameters,
            "row": dict(self.row),
        }


CALIBRATION = Path(__file__).with_name("choice_calibration.json")
"""The stored table: {"rows": [...]}, each row with `device` (a torch device type), the model
size bucket `min_parameters` <= parameters < `max_parameters` (null: no bound), `context_once`,
and the timings and models it was measured on."""


@cache
def _rows() -> tuple[dict[str, object], ...]:
    return tuple(json.loads(CALIBRATION.read_text(encoding="utf-8"))["rows"])


def calibration_row(device_type: str, parameters: int) -> dict[str, object] | None:
    """The table's row for a device type and model size, or None when no row covers them."""
    for row in _rows():
        low, high = row["min_parameters"], row["max_parameters"]
        if (
            row["device"] == device_type
            and parameters >= int(low)  # type: ignore[call-overload]
            and (high is None or parameters < int(high))  # type: ignore[call-overload]
        ):
            return row
    return None


def calibrated(device: str, device_type: str, parameters: int) -> ChoicePacking:
    """The stored choice for this device and model size (packed when no row covers them)."""
    row = calibration_row(device_type, parameters)
    if row is None:
        row = {
            "device": device_type,
            "measured": False,
            "note": "no calibration row covers this device and model size: choices are packed "
            "behind one context pass, which computes the fewest tokens",
        }
    return ChoicePacking(
        context_once=bool(row.get("context_once", True)),
        measured_docs=0,
        context_once_seconds=0.0,
        per_choice_seconds=0.0,
        context_once_tokens=0,
        per_choice_tokens=0,
        device=device,
        parameters=parameters,
        row=row,
    )
