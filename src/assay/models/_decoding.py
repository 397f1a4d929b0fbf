"""How a generation request is decoded, decided once for every backend that sends it elsewhere.

API servers and vLLM receive the same decisions, each in its own field names.
"""

from __future__ import annotations

from dataclasses import dataclass

from assay.requests.types import GenerateRequest


@dataclass(frozen=True, slots=True)
class Decoding:
    """Decoding settings of one request, normalised."""

    temperature: float
    """0 means greedy."""
    top_p: float | None
    top_k: int | None
    seed: int | None
    stops: tuple[str, ...]
    """Non-empty stop strings, in the request's order."""


def decoding_of(request: GenerateRequest, default_seed: int | None) -> Decoding:
    """The request's decoding: greedy unless it samples at a positive temperature.

    Sampling at temperature 0 is greedy, as the hf backend treats it. Each sample of a doc gets
    its own seed (the request's seed, else the backend default, plus the sample index), so
    repeated samples differ while each stays reproducible.
    """
    params = request.params
    sampling = params.do_sample and params.temperature > 0
    base = params.seed if params.seed is not None else default_seed
    return Decoding(
        temperature=params.temperature if sampling else 0.0,
        top_p=params.top_p,
        top_k=params.top_k,
        seed=None if base is None else base + request.sample_index,
        stops=tuple(s for s in params.until if s),
    )
