"""The run plan and the shard's records: built once, never changed by a later stage.

The backend's arguments are computed once per run, an output folder is checked once where the
model's identity is known before it loads, and each stage's record is frozen."""

from __future__ import annotations

import dataclasses

import pytest
from test_evaluator import gen_task

import assay.run.backend as backend_module
import assay.run.resume as resume_module
from assay.models.dummy import DummyLM
from assay.requests.doc_result import DocResult
from assay.run.backend import judge_source, run_source
from assay.run.evaluation import Evaluation
from assay.run.run_plan import plan_run
from assay.run.settings import RunSettings
from assay.tasks.registry import Resolved, TaskRequest


def counting(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[int]:
    """Count the calls of `module.name` (looked up by name at each call)."""
    calls: list[int] = []
    original = getattr(module, name)

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def evaluation(**settings: object) -> Evaluation:
    resolved = Resolved([TaskRequest(gen_task())])
    return Evaluation(resolved, RunSettings(show_progress=False, **settings))  # type: ignore[arg-type]


def test_the_backend_arguments_are_computed_once_for_the_description_build_and_header(
    monkeypatch, tmp_path
):
    calls = counting(monkeypatch, backend_module, "backend_args")
    run = evaluation(model="dummy", batch_size=4, output_dir=tmp_path / "out")
    run.run()
    # The plan holds the arguments the description, the build and results.json's header read.
    assert len(calls) == 1
    assert run.plan.backend.batch_size == 4
    assert run.plan.backend.args == {}  # the batch size is handed to the builder on its own
    results = (tmp_path / "out" / "results.json").read_text(encoding="utf-8")
    assert '"batch_size": 4' in results


def test_a_folder_is_checked_once_when_the_identity_is_known_before_the_build(
    monkeypatch, tmp_path
):
    calls = counting(monkeypatch, resume_module, "check_files")
    evaluation(model="dummy", output_dir=tmp_path / "out").run()
    assert len(calls) == 1


def test_a_model_object_has_its_folder_checked_again_once_its_identity_is_known(
    monkeypatch, tmp_path
):
    calls = counting(monkeypatch, resume_module, "check_files")
    evaluation(model=DummyLM(), output_dir=tmp_path / "out").run()
    assert len(calls) == 2  # before the run (the run key), then with the model's identity


def test_overwrite_still_replaces_a_different_runs_files_after_the_single_check(tmp_path):
    out = tmp_path / "out"
    evaluation(model="dummy", output_dir=out, log_samples=True).run()
    first = (out / "samples_gen.jsonl").read_text(encoding="utf-8").count("\n")
    evaluation(model="dummy", output_dir=out, log_samples=True, limit=2, overwrite=True).run()
    assert first == 7
    assert (out / "samples_gen.jsonl").read_text(encoding="utf-8").count("\n") == 2


def test_the_plan_and_the_records_are_frozen(tmp_path):
    plan = plan_run(Resolved([TaskRequest(gen_task())]), RunSettings(model="dummy"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.tasks = ()  # type: ignore[misc]
    assert [t.name for t in plan.tasks] == ["gen"]
    assert plan.place is None and plan.run_key["tasks"] == ["gen"]
    record = DocResult(doc_id=0, doc=plan.tasks[0].load().first_doc(), instances=[], resps=[])  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.values = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        DocResult(0, record.doc, [], [])  # type: ignore[misc]  # keyword-only


def test_a_judge_is_built_from_its_own_source_not_the_evaluated_models_flags():
    settings = RunSettings(model="dummy", model_args={"seed": 1}, batch_size=8, device="cpu")
    assert run_source(settings).factory_args() == {"seed": 1, "device": "cpu", "batch_size": 8}
    judge = judge_source(settings, "dummy", {"response": "yes"})
    # --device and --batch-size are the evaluated model's; the judge keeps its own model args.
    assert (judge.model, judge.factory_args(), judge.device) == ("dummy", {"response": "yes"}, None)
