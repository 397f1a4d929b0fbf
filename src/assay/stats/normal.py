"""Normal-distribution helpers shared by the interval and test code of `stats` (one place for
the quantiles every normal-approximation interval uses)."""

from __future__ import annotations

import math
from statistics import NormalDist

_STANDARD = NormalDist()


def z_quantile(probability: float) -> float:
    """The standard normal quantile Φ⁻¹(probability)."""
    return _STANDARD.inv_cdf(probability)


def two_sided_z(confidence: float) -> float:
    """z such that a standard normal lies in [-z, z] with probability `confidence`:
    Φ⁻¹(1 - (1 - confidence)/2), 1.959963... at 0.95."""
    check_confidence(confidence)
    return z_quantile(1 - (1 - confidence) / 2)


def two_sided_p(z: float) -> float:
    """2·(1 - Φ(|z|)), computed as erfc(|z|/√2) so that tiny p-values keep their digits."""
    return math.erfc(abs(z) / math.sqrt(2))


def check_confidence(confidence: float) -> None:
    """A confidence level must lie strictly between 0 and 1."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
