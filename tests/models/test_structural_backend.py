"""An object with LM's request methods and identity serves as a backend without subclassing LM."""

from __future__ import annotations

from pathlib import Path

import pytest

import assay
from assay.errors import ConfigError
from assay.models.base import LM, checked_backend
from assay.models.dummy import DummyLM

REPO = Path(__file__).resolve().parents[2]


class DuckBackend:
    """DummyLM's answers through composition: the four required members, one capability."""

    max_length = 77

    def __init__(self, seed: int) -> None:
        self.inner = DummyLM(seed=seed)

    def loglikelihood(self, requests):
        return self.inner.loglikelihood(requests)

    def loglikelihood_rolling(self, requests):
        return self.inner.loglikelihood_rolling(requests)

    def generate_until(self, requests):
        return self.inner.generate_until(requests)

    def identity(self):
        return {**self.inner.identity(), "backend": "duck"}


def test_a_duck_typed_backend_scores_as_the_backend_it_wraps(monkeypatch):
    monkeypatch.chdir(REPO)  # the example task's data_files are relative to the repository
    tasks = dict(tasks=["arithmetic_mc", "arithmetic"], include_path="examples/tasks")
    duck = assay.evaluate(DuckBackend(seed=3), **tasks)
    dummy = assay.evaluate("dummy", model_args="seed=3", **tasks)
    assert duck["results"] == dummy["results"]


def test_the_wrapper_keeps_the_object_s_capabilities_and_lm_s_defaults():
    backend = checked_backend(DuckBackend(seed=1), "model")
    assert isinstance(backend, LM)
    assert backend.max_length == 77  # the object's own
    assert backend.chat_template() is None and backend.accepts_images is False  # LM's defaults
    assert backend.batch_sizes == []
    assert backend.provenance() == {"backend": "duck"}


def test_an_object_missing_a_request_method_is_refused_naming_it():
    class Partial:
        def loglikelihood(self, requests):
            return []

        def identity(self):
            return {}

    with pytest.raises(
        ConfigError,
        match="Partial is not a model backend: it lacks loglikelihood_rolling, generate_until",
    ):
        checked_backend(Partial(), "model")
