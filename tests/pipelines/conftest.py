"""Fixtures of the pipeline tests."""

from __future__ import annotations

import pytest
from pipeline_fakes import BUILT, CalcLM


@pytest.fixture
def built_models() -> list[CalcLM]:
    """Models built by the "pipelines-calc" factory during the test."""
    BUILT.clear()
    return BUILT
