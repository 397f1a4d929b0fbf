"""`LM.unloaded`: backends that load nothing heavy are built at once, and tell the identity
their factory's build tells; the run reads every model's identity through it."""

from __future__ import annotations

import json

import pytest
from fixtures.waiting import HANG

from assay.models.base import LM, MODELS, Unloaded
from assay.run.backend import build_executor, described_model, run_source
from assay.run.deferred import DeferredBackend
from assay.run.settings import RunSettings


def replay_file(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"prompt": "Q", "response": "A"}) + "\n", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("dummy", {"seed": 3, "response": "x"}),
        ("replay", None),
        ("openai-chat", {"model": "m", "base_url": "http://127.0.0.1:9/v1"}),
        ("openai-completions", {"model": "m", "base_url": "http://127.0.0.1:9/v1"}),
        ("anthropic-chat", {"model": "m"}),
    ],
)
def test_light_backends_are_their_own_description(tmp_path, name, args):
    args = {"path": replay_file(tmp_path)} if args is None else args
    factory = MODELS.get(name)
    described = described_model(run_source(RunSettings(model=name, model_args=args)))
    assert isinstance(described, LM) and not isinstance(described, Unloaded)
    assert described.identity() == factory(**args).identity()
    # The run answers with it: nothing is deferred, nothing built twice.
    assert build_executor(RunSettings(model=name, model_args=args), None, described).model is (
        described
    )


def test_a_backend_that_cannot_tell_unbuilt_is_built_first():
    assert LM.unloaded({"anything": 1}) is None
    model_object = RunSettings(model=MODELS.get("dummy")())
    assert described_model(run_source(model_object)) is None


class _Described(Unloaded):
    def identity(self):
        return {"backend": "toy", "weights": "abc"}


class _Built(LM):
    def __init__(self, weights: str) -> None:
        self.weights = weights

    def identity(self):
        return {"backend": "toy", "weights": self.weights}

    def loglikelihood(self, requests):
        return []

    def loglikelihood_rolling(self, requests):
        return []

    def generate_until(self, requests):
        return ["built"] * len(requests)


def test_a_deferred_backend_builds_once_at_the_first_request():
    from assay.requests.types import GenerateRequest

    builds: list[int] = []

    def build() -> LM:
        builds.append(1)
        return _Built("abc")

    model = DeferredBackend(_Described(), build)
    assert model.identity() == {"backend": "toy", "weights": "abc"} and builds == []
    assert model.prefix_cache_stats() is None and model.batch_sizes == []
    assert model.generate_until([GenerateRequest("Q")]) == ["built"]
    assert model.generate_until([GenerateRequest("Q")]) == ["built"]
    assert builds == [1] and model.built is not None


def test_a_built_model_unlike_its_description_is_refused():
    from assay.errors import ModelError
    from assay.requests.types import GenerateRequest

    model = DeferredBackend(_Described(), lambda: _Built("other"))
    with pytest.raises(ModelError, match=r"weights: 'abc' read, 'other' loaded"):
        model.generate_until([GenerateRequest("Q")])
    assert model.built is None


def test_a_deferred_hf_model_takes_tools_as_the_loaded_one_does(tiny_model_dir):
    # An agent task (tools) run from the CLI meets the deferred backend first.
    args = {"pretrained": str(tiny_model_dir), "device": "cpu"}
    described = described_model(run_source(RunSettings(model="hf", model_args=args)))
    assert isinstance(described, Unloaded) and described.accepts_tools
    assert DeferredBackend(described, lambda: _Built("abc")).accepts_tools
    assert not DeferredBackend(_Described(), lambda: _Built("abc")).accepts_tools


def test_a_prefetched_backend_is_built_once_in_the_background_and_waited_for():
    import threading

    from assay.requests.types import GenerateRequest

    builds: list[str] = []
    release = threading.Event()

    def build() -> LM:
        release.wait(HANG)  # a bound only a hang reaches: the test releases it
        builds.append(threading.current_thread().name)
        return _Built("abc")

    model = DeferredBackend(_Described(), build)
    model.prefetch()
    model.prefetch()  # a second start is ignored
    assert model.built is None
    release.set()
    assert model.generate_until([GenerateRequest("Q")]) == ["built"]
    assert builds == ["assay-model-load"] and model.built is not None


def test_a_background_build_that_fails_raises_its_own_error_at_the_first_request():
    from assay.errors import ModelError
    from assay.requests.types import GenerateRequest

    def build() -> LM:
        raise ModelError("--model toy: no weights in /nowhere; give pretrained=DIR.")

    model = DeferredBackend(_Described(), build)
    model.prefetch()
    with pytest.raises(ModelError, match=r"^--model toy: no weights in /nowhere; give") as err:
        model.generate_until([GenerateRequest("Q")])
    assert type(err.value) is ModelError and model.built is None
    # Asked again, the backend is built again in the foreground, failing the same way.
    with pytest.raises(ModelError, match="no weights in /nowhere"):
        model.generate_until([GenerateRequest("Q")])


def test_a_prefetched_backend_unlike_its_description_is_refused():
    from assay.errors import ModelError
    from assay.requests.types import GenerateRequest

    model = DeferredBackend(_Described(), lambda: _Built("other"))
    model.prefetch()
    with pytest.raises(ModelError, match=r"weights: 'abc' read, 'other' loaded"):
        model.generate_until([GenerateRequest("Q")])


def test_on_built_runs_once_in_the_callers_thread_before_the_first_request():
    import threading

    from assay.requests.types import GenerateRequest

    seen: list[tuple[str, bool]] = []
    model = DeferredBackend(_Described(), lambda: _Built("abc"))
    model.on_built = lambda: seen.append((threading.current_thread().name, model.built is not None))
    model.prefetch()
    assert model.generate_until([GenerateRequest("Q")]) == ["built"]
    assert model.generate_until([GenerateRequest("Q")]) == ["built"]
    assert seen == [(threading.current_thread().name, True)]
