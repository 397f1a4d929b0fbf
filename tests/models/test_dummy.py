"""dummy backend: deterministic seeded answers independent of batching; argument checks."""

from __future__ import annotations

import pytest

from assay.errors import ConfigError
from assay.models.base import LM, MODELS
from assay.requests.types import (
    GenerateRequest,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    RollingRequest,
    RollingResult,
)

REQS = [LoglikelihoodRequest(f"ctx {i}", f" cont {i % 3}") for i in range(50)]


def test_answers_are_seeded_and_independent_of_batch_order():
    lm = MODELS.get("dummy")()
    assert isinstance(lm, LM)
    whole = lm.loglikelihood(REQS)
    assert all(isinstance(r, LoglikelihoodResult) and -20.0 < r.logprob <= 0.0 for r in whole)
    assert lm.loglikelihood(list(reversed(REQS))) == list(reversed(whole))
    assert lm.loglikelihood(REQS[10:12]) == whole[10:12]
    assert len({r.logprob for r in whole}) > 40
    other = MODELS.get("dummy")(seed=7).loglikelihood(REQS)
    assert other != whole


def test_rolling_and_generation():
    lm = MODELS.get("dummy")(response="hello")
    (rolling,) = lm.loglikelihood_rolling([RollingRequest("some text")])
    assert isinstance(rolling, RollingResult) and rolling.logprob < 0 and rolling.n_tokens == 9
    assert lm.generate_until([GenerateRequest("p"), GenerateRequest("q")]) == ["hello", "hello"]


def test_identity_names_what_changes_answers_only():
    a = MODELS.get("dummy")(seed=1, batch_size=8, device="cpu")
    b = MODELS.get("dummy")(seed=1)
    assert a.identity() == b.identity() == {"backend": "dummy", "seed": 1, "response": "lol"}
    assert MODELS.get("dummy")(seed=2).identity() != b.identity()


@pytest.mark.parametrize("args", [{"delay": -1}, {"delay": "soon"}, {"colour": "red"}])
def test_bad_arguments_are_config_errors(args):
    with pytest.raises(ConfigError):
        MODELS.get("dummy")(**args)
