"""Fixtures of the pipeline tests."""

from __future__ import annotations

import pytest
from pipeline_fakes import BUILT, CalcLM


@pytest.fixture
def built_models() -> list[CalcLM]:
    """Models built by the "pipelines-calc" factory during the test."""
    BUILT.clear()
    return BUILT


@pytest.fixture(scope="session")
def minilm_embeddings() -> object:
    """The packaged all-MiniLM-L6-v2 sentence embeddings, loaded offline once per session."""
    from assay.pipelines import SentenceTransformerEmbeddings

    embeddings = SentenceTransformerEmbeddings("sentence-transformers/all-MiniLM-L6-v2")
    embeddings.embed_query("warm up")
    return embeddings
