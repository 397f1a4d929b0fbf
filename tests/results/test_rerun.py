"""A run into an output folder holding results: the same run resumes, another is refused unless
--overwrite, which removes the earlier run's files."""

from __future__ import annotations

import json

import pytest

from assay.doc import Doc
from assay.errors import ConfigError
from assay.run.evaluation import Evaluation
from assay.run.settings import RunSettings
from assay.tasks.config import TaskConfig
from assay.tasks.registry import Resolved, TaskRequest

ROWS = [{"q": f"q{i}", "label": i % 2} for i in range(6)]


def task(name):
    return TaskConfig(
        name=name,
        prompt_function=lambda row, _: Doc(row["q"], ["no", "yes"], row["label"]),
        dataset_loader=lambda **_: {"validation": ROWS},
        metrics=["acc"],
    )


def run(out, names, **settings):
    settings = {"model": "dummy", "output_dir": out, "log_samples": True, **settings}
    resolved = Resolved([TaskRequest(task(n)) for n in names])
    return Evaluation(resolved, RunSettings(show_progress=False, **settings)).run()


def test_the_same_run_resumes_into_its_folder(tmp_path):
    first = run(tmp_path, ["a", "b"])
    files = {p.name: p.read_bytes() for p in tmp_path.glob("samples_*.jsonl")}
    again = run(tmp_path, ["a", "b"])
    assert again["results"] == first["results"]
    assert {p.name: p.read_bytes() for p in tmp_path.glob("samples_*.jsonl")} == files


@pytest.mark.parametrize(
    ("names", "settings", "difference"),
    [
        (["a"], {}, "tasks: ['a', 'b'] there, ['a'] now"),
        (["a", "b"], {"limit": 2}, "limit: None there, 2 now"),
        (["a", "b"], {"model_args": {"seed": 9}}, "a different model"),
    ],
)
def test_a_different_run_is_refused_and_overwrite_replaces_the_earlier_files(
    tmp_path, names, settings, difference
):
    run(tmp_path, ["a", "b"])
    with pytest.raises(ConfigError) as refused:
        run(tmp_path, names, **settings)
    assert difference in str(refused.value) and "--overwrite" in str(refused.value)
    run(tmp_path, names, overwrite=True, **settings)
    results = json.loads((tmp_path / "results.json").read_text())
    assert sorted(results["results"]) == names
    assert sorted(p.name for p in tmp_path.glob("samples_*.jsonl")) == [
        f"samples_{n}.jsonl" for n in names
    ]


def test_a_results_file_of_another_tool_is_not_mixed_with(tmp_path):
    (tmp_path / "results.json").write_text('{"results": {}}')
    with pytest.raises(ConfigError, match="another tool or an older assay"):
        run(tmp_path, ["a"])


def test_every_setting_that_changes_results_is_part_of_the_run_key():
    from assay.run.resume import run_key
    from assay.run.settings import setting_names

    key = run_key(RunSettings(model="dummy"), ["a"])
    assert {"tasks", "model", "limit", "num_fewshot", "gen_kwargs", "seed", "cluster_by"} <= set(
        key
    )
    assert not {"batch_size", "device", "output_dir", "cache"} & set(key)
    assert set(key) - {"tasks"} <= set(setting_names())
