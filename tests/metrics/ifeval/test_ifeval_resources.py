"""IFEval's data files ship with the package and are checked before anything is generated."""

from __future__ import annotations

import pytest

from assay.errors import DataError
from assay.metrics.ifeval import _resources, ensure_ifeval_resources


def test_shipped_resources_load():
    ensure_ifeval_resources()
    tokenizer = _resources.punkt_tokenizer()
    assert tokenizer.tokenize("Mr. Smith went home. He slept.") == [
        "Mr. Smith went home.",
        "He slept.",
    ]


def test_nltk_looks_in_the_package_first():
    import nltk

    _resources.punkt_tokenizer()
    assert nltk.data.path[0] == str(_resources.NLTK_DATA_DIR)


def test_word_list_is_the_official_one():
    words = _resources.word_list()
    assert len(words) == len(set(words)) == 1525
    assert words[:3] == ("western", "sentence", "signal")


def test_missing_punkt_tables_fail_with_the_path(monkeypatch, tmp_path):
    monkeypatch.setattr(_resources, "PUNKT_ENGLISH_DIR", tmp_path)
    with pytest.raises(DataError, match="punkt_tab") as error:
        ensure_ifeval_resources()
    assert str(tmp_path) in str(error.value)
    assert "ortho_context.tab" in str(error.value)


def test_missing_word_list_fails(monkeypatch, tmp_path):
    monkeypatch.setattr(_resources, "WORD_LIST_FILE", tmp_path / "word_list.txt")
    with pytest.raises(DataError, match="keyword list"):
        ensure_ifeval_resources()
