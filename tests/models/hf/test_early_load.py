"""`--model hf`'s weights load beside the data loading: the model is described before the data
are read and, where no response cache can answer, its load starts then; what a run refuses,
and in which order, is what it refused when the model was read after the data."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import assay.run.early as early_module
from assay.errors import AssayError, ModelError
from assay.run.api import evaluate
from assay.run.early import _cache_may_answer, start
from assay.run.evaluation import Evaluation
from assay.run.settings import RunSettings

pytestmark = pytest.mark.slow

_TASK = """\
task: toy_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {rows}
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{q}}}}\\nAnswer:"
doc_to_choice: ["yes", "no"]
doc_to_target: "{{{{label}}}}"
metric_list:
  - metric: acc
"""


def toy_task(folder: Path, rows: str | None = '{"q": "sky blue?", "label": 0}\n') -> Path:
    """A two-choice task over `rows` (None: its data file is missing)."""
    folder.mkdir()
    data = folder / "rows.jsonl"
    if rows is not None:
        data.write_text(rows)
    (folder / "toy_mc.yaml").write_text(_TASK.format(rows=data), encoding="utf-8")
    return folder


def hf_args(model: Path | str) -> dict[str, Any]:
    return {"pretrained": str(model), "device": "cpu"}


def test_the_weights_load_while_the_data_are_read(tmp_path, tiny_model_dir, monkeypatch):
    tasks = toy_task(tmp_path / "tasks")
    loading = threading.Event()
    build = early_module.build_model

    def watched_build(*args: Any, **kwargs: Any) -> Any:
        loading.set()
        return build(*args, **kwargs)

    seen: list[bool] = []
    load_data = Evaluation.load_data

    def watched_load_data(self: Evaluation) -> None:
        # The load was started before the data: it is under way (or done) within a bounded wait.
        seen.append(loading.wait(60))
        load_data(self)

    monkeypatch.setattr(early_module, "build_model", watched_build)
    monkeypatch.setattr(Evaluation, "load_data", watched_load_data)
    results = evaluate(
        "hf", "toy_mc", include_path=tasks, model_args=hf_args(tiny_model_dir), cache=False,
        show_progress=False,
    )  # fmt: skip
    assert seen == [True]
    assert results["results"]["toy_mc"]["acc,none"] in (0.0, 1.0)


def test_with_the_overlap_off_the_model_loads_at_the_first_request(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_OVERLAP_LOAD", "0")
    settings = RunSettings(model="hf", model_args=hf_args(tmp_path))
    assert start(settings, settings, hf_args(tmp_path)) is None


def test_light_backends_are_described_where_they_were():
    settings = RunSettings(model="dummy")
    assert start(settings, settings, {}) is None


def test_a_cache_that_may_hold_answers_leaves_the_load_to_the_run(tmp_path):
    # The run loads the weights only for a request its cache cannot answer, once it knows.
    assert not _cache_may_answer(RunSettings(model="dummy", cache=False))
    assert not _cache_may_answer(RunSettings(model="dummy"))  # no output: no cache
    assert not _cache_may_answer(RunSettings(model="dummy", output_dir=tmp_path / "new"))
    assert _cache_may_answer(RunSettings(model="dummy", output_dir=tmp_path))
    assert not _cache_may_answer(RunSettings(model="dummy", cache=tmp_path / "c.db"))
    (tmp_path / "c.db").write_text("")
    assert _cache_may_answer(RunSettings(model="dummy", cache=tmp_path / "c.db"))


def test_a_data_error_is_still_told_before_a_model_error(tmp_path):
    tasks = toy_task(tmp_path / "tasks", rows=None)
    with pytest.raises(AssayError, match=r"rows\.jsonl") as err:
        evaluate("hf", "toy_mc", include_path=tasks, model_args=hf_args(tmp_path / "none"))
    assert not isinstance(err.value, ModelError)


def test_a_bad_model_is_refused_with_the_message_of_the_sequential_start(tmp_path, monkeypatch):
    tasks = toy_task(tmp_path / "tasks")
    messages = []
    for overlap in ("1", "0"):
        monkeypatch.setenv("ASSAY_OVERLAP_LOAD", overlap)
        with pytest.raises(ModelError, match="no such directory") as err:
            evaluate("hf", "toy_mc", include_path=tasks, model_args=hf_args(tmp_path / "none"))
        messages.append(str(err.value))
    assert messages[0] == messages[1]


def test_a_failed_background_load_raises_its_error_then_loads_again(tmp_path, monkeypatch):
    calls: list[str] = []

    def failing_build(*args: Any, **kwargs: Any) -> Any:
        calls.append(threading.current_thread().name)
        raise ModelError("--model hf: could not load the weights of 'x': disk full.")

    from assay.run.early import EarlyModel

    described = object()
    monkeypatch.setattr(early_module, "described_model", lambda *a: described)
    monkeypatch.setattr(early_module, "Unloaded", object)  # the stand-in: anything
    monkeypatch.setattr(early_module, "build_model", failing_build)
    settings = RunSettings(model="hf", model_args=hf_args(tmp_path))
    early = EarlyModel(settings, "hf", hf_args(tmp_path), load=True)
    assert early.loads and early.described() is described
    for _ in range(2):
        with pytest.raises(ModelError, match="disk full"):
            early.build()
    assert calls == ["assay-model-load", threading.current_thread().name]
