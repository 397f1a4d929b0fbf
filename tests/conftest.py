"""Shared test setup: fixtures that build tiny models and data offline."""

from __future__ import annotations

from hypothesis import settings

# Property tests share two cores with the rest of the suite: wall-clock deadlines only add flakes.
settings.register_profile("assay", deadline=None, max_examples=100)
settings.load_profile("assay")
