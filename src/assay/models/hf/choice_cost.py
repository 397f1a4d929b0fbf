"""Whether a question's choices run behind one context pass, decided by timing both on the run.

Packing a doc's choices behind one pass of their shared context (`hf.score`) computes fewer
tokens, but each row then carries a 4-D mask and, on some devices and model sizes, attention
over it costs more than recomputing the context per choice. Nothing here is assumed: with
ASSAY_MEASURE_CHOICE_PACKING=1, the first call with such docs scores a few of them both ways,
times each, and the cheaper way scores the rest of the run. The inputs and the choice are kept
for results.json.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

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
        """Plain values for results.json."""
        return {"backend": "hf", **asdict(self)}
