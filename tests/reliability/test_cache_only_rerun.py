"""A rerun whose answers are all in the response cache never loads the model, and an output
folder written by another model is refused before any weight loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from toy_tasks import normalised_results, output_files

from assay.cli.main import main
from assay.errors import ConfigError
from assay.run.api import evaluate
from assay.run.evaluation import NOT_LOADED

pytestmark = pytest.mark.slow

TASKS = ["toy_mc", "toy_gen"]


def hf_run(task_dir: Path, model: Path, out: Path, tasks: list[str] = TASKS, **settings: Any):
    return evaluate(
        "hf",
        tasks,
        model_args={"pretrained": str(model), **settings.pop("model_args", {})},
        include_path=[task_dir],
        num_fewshot=1,
        log_samples=True,
        output_dir=out,
        **{"show_progress": False, **settings},
    )


def same_run(folder: Path, reference: Path) -> bool:
    """The two results.json files agree but for timings, cache counts and which --cache each
    named (config.use_cache)."""
    mine, theirs = (normalised_results(f / "results.json") for f in (folder, reference))
    for results in (mine, theirs):
        results["config"].pop("use_cache")
    return mine == theirs


def refuse_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on every weight load of `--model hf` fails (after noting its model path), so
    a run that needs none passes and one that loads fails."""
    import assay.models.hf.model as hf_model

    seen: list[str] = []

    def refuse(args: Any) -> Any:
        seen.append(args.pretrained)
        raise AssertionError(f"the weights of {args.pretrained} were loaded")

    monkeypatch.setattr(hf_model, "load", refuse)
    return seen


def test_a_rerun_served_by_the_cache_never_loads_the_model(
    task_dir, tiny_model_dir, tmp_path, monkeypatch, capsys
):
    first = tmp_path / "first"
    hf_run(task_dir, tiny_model_dir, first)
    results, samples = normalised_results(first / "results.json"), output_files(first)
    loads = refuse_loads(monkeypatch)
    capsys.readouterr()
    hf_run(task_dir, tiny_model_dir, first, show_progress=True)  # resumes in its own folder
    assert NOT_LOADED in capsys.readouterr().err
    assert output_files(first) == samples
    assert normalised_results(first / "results.json") == results

    # Another folder reading the first one's cache: the same files, still no load.
    again = tmp_path / "again"
    hf_run(task_dir, tiny_model_dir, again, cache=first / "cache.sqlite")
    assert output_files(again) == samples
    assert same_run(again, first)
    assert loads == []


def test_a_partly_cached_rerun_loads_the_model_for_what_is_missing(
    task_dir, tiny_model_dir, tmp_path, monkeypatch, capsys
):
    import assay.models.hf.model as hf_model

    cache = tmp_path / "cache.sqlite"
    hf_run(task_dir, tiny_model_dir, tmp_path / "mc", ["toy_mc"], cache=cache)
    reference = tmp_path / "reference"
    hf_run(task_dir, tiny_model_dir, reference, cache=False)
    real_load, loaded = hf_model.load, []

    def counted(args: Any) -> Any:
        loaded.append(args.pretrained)
        return real_load(args)

    monkeypatch.setattr(hf_model, "load", counted)
    capsys.readouterr()
    both = tmp_path / "both"
    hf_run(task_dir, tiny_model_dir, both, cache=cache, show_progress=True)
    assert loaded == [str(tiny_model_dir)]  # once, for toy_gen
    assert NOT_LOADED not in capsys.readouterr().err
    assert output_files(both) == output_files(reference)
    assert same_run(both, reference)


def test_a_folder_of_another_model_is_refused_before_its_weights_load(
    task_dir, tiny_model_dir, tmp_path, monkeypatch, capsys
):
    out = tmp_path / "out"
    hf_run(task_dir, tiny_model_dir, out, ["toy_mc"])  # model A: float32
    calls = refuse_loads(monkeypatch)  # model B (bfloat16) must be refused unloaded
    with pytest.raises(ConfigError, match="a different model"):
        hf_run(task_dir, tiny_model_dir, out, ["toy_mc"], model_args={"dtype": "bfloat16"})
    code = main(
        ["run", "--model", "hf", "--model-args", f"pretrained={tiny_model_dir},dtype=bfloat16",
         "--tasks", "toy_mc", "--include-path", str(task_dir), "--num-fewshot", "1",
         "--log-samples", "--no-progress", "--output-dir", str(out)]
    )  # fmt: skip
    assert code == 2
    assert "holds the results of a different model" in capsys.readouterr().err
    assert calls == []


def test_weights_loaded_in_the_background_give_the_sequential_run_files(
    task_dir, tiny_model_dir, tmp_path, monkeypatch
):
    import threading

    import assay.models.hf.model as hf_model
    from assay.run.deferred import OVERLAP_ENV

    real_load, threads = hf_model.load, []

    def noted(args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real_load(args)

    monkeypatch.setattr(hf_model, "load", noted)
    monkeypatch.setenv(OVERLAP_ENV, "0")
    hf_run(task_dir, tiny_model_dir, tmp_path / "sequential", cache=False)
    monkeypatch.setenv(OVERLAP_ENV, "1")
    hf_run(task_dir, tiny_model_dir, tmp_path / "overlapped", cache=False)
    assert threads == ["MainThread", "assay-model-load"]
    assert output_files(tmp_path / "overlapped") == output_files(tmp_path / "sequential")
    assert same_run(tmp_path / "overlapped", tmp_path / "sequential")


def test_a_background_load_that_fails_is_reported_as_the_foreground_one(
    task_dir, tiny_model_dir, tmp_path, monkeypatch, capsys
):
    from assay.run.deferred import OVERLAP_ENV

    broken = tmp_path / "broken"
    broken.mkdir()
    for path in tiny_model_dir.iterdir():  # the config and tokenizer, but no weights
        if path.suffix != ".safetensors":
            (broken / path.name).write_bytes(path.read_bytes())
    errors = []
    for overlap in ("0", "1"):
        monkeypatch.setenv(OVERLAP_ENV, overlap)
        code = main(
            ["run", "--model", "hf", "--model-args", f"pretrained={broken}", "--tasks",
             "toy_mc", "--include-path", str(task_dir), "--no-progress", "--no-cache",
             "--output-dir", str(tmp_path / f"out-{overlap}")]
        )  # fmt: skip
        err = capsys.readouterr().err
        errors.append((code, err.replace(f"out-{overlap}", "out-N")))
    assert errors[0] == errors[1]
    assert errors[0][0] != 0 and "Traceback" not in errors[0][1]
