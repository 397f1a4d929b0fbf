"""The backend contract: optional capabilities have the documented defaults; non-backends are
refused with a message that names where they came from."""

from __future__ import annotations

from typing import Any

import pytest

from assay.errors import ConfigError
from assay.models.base import LM, MODELS, checked_backend, load_model


class Minimal(LM):
    """Only the required members."""

    def loglikelihood(self, requests: Any) -> list[Any]:
        return []

    def loglikelihood_rolling(self, requests: Any) -> list[Any]:
        return []

    def generate_until(self, requests: Any) -> list[str]:
        return []

    def identity(self) -> dict[str, Any]:
        return {"backend": "minimal"}


def test_optional_capabilities_default_to_absent():
    lm = Minimal()
    assert lm.accepts_messages is False
    assert lm.max_length is None and lm.batch_size is None and lm.batch_sizes == []
    assert lm.chat_template() is None and lm.token_counter() is None
    assert lm.provenance() == {"backend": "minimal"}


def test_a_backend_must_implement_the_request_kinds():
    class NoGeneration(LM):
        def loglikelihood(self, requests: Any) -> list[Any]:
            return []

        def loglikelihood_rolling(self, requests: Any) -> list[Any]:
            return []

        def identity(self) -> dict[str, Any]:
            return {}

    with pytest.raises(TypeError, match="generate_until"):
        NoGeneration()  # type: ignore[abstract]


def test_objects_that_are_not_backends_are_refused_by_name(monkeypatch):
    assert checked_backend(Minimal(), "model").identity() == {"backend": "minimal"}
    with pytest.raises(
        ConfigError,
        match=r"model: dict is not a model backend: it lacks loglikelihood, "
        r"loglikelihood_rolling, generate_until, identity\.",
    ):
        checked_backend({}, "model")
    monkeypatch.setitem(MODELS._entries, "duck", lambda **kw: object())
    with pytest.raises(ConfigError, match="--model duck: object is not a model backend"):
        load_model("duck", {})


def test_every_built_in_backend_is_an_lm():
    lm = load_model("dummy", {})
    assert isinstance(lm, LM) and lm.token_counter() is None and lm.chat_template() is None
