"""lighteval's task strings and built-in tasks, resolved from the installed lighteval package:
one source per name, the choice printed; one built-in run end to end over local rows served as
its hub dataset."""

from __future__ import annotations

import importlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.hf_cache import write_hub_dataset

from assay.errors import ConfigError, TaskConfigError
from assay.tasks.registry import Registry

REPO = Path(__file__).resolve().parents[4]


def lighteval_table(module: str) -> dict:
    """lighteval's own configs of one of its task modules, by name."""
    return {
        c.name: c for c in importlib.import_module(f"lighteval.tasks.tasks.{module}").TASKS_TABLE
    }


def test_a_suite_prefix_means_lighteval_s_task_and_says_so(caplog):
    theirs = lighteval_table("gsm8k")["gsm8k"]
    with caplog.at_level(logging.WARNING):
        resolved = Registry().resolve(["lighteval|gsm8k|5"])
    [request] = resolved.tasks
    assert request.num_fewshot == 5
    config = request.config
    assert (config.name, config.hf_repo, config.hf_subset) == (
        "gsm8k",
        theirs.hf_repo,
        theirs.hf_subset,
    )
    assert config.source.endswith("lighteval/tasks/tasks/gsm8k.py")
    assert config.few_shots_select == f"lighteval:{theirs.few_shots_select}"
    assert [m.name for m in config.metrics] == [m.metric_name for m in theirs.metrics]
    assert "'gsm8k' is lighteval's built-in" in caplog.text
    assert "assay's built-in task of that name is `--tasks gsm8k`" in caplog.text


def test_a_bare_name_is_assay_s_when_assay_has_it():
    [request] = Registry().resolve(["gsm8k|5"]).tasks
    assert request.config.source.startswith(str(REPO / "src" / "assay" / "catalog"))
    assert request.config.prompt_layout == "lm_eval"


def test_a_bare_name_only_lighteval_has_is_lighteval_s(caplog):
    with caplog.at_level(logging.WARNING):
        [request] = Registry().resolve(["arc:easy|0"]).tasks
    assert request.config.hf_repo == lighteval_table("arc")["arc:easy"].hf_repo
    assert "'arc:easy' is lighteval's task" in caplog.text


def test_superset_names_expand_to_every_member():
    expected = sorted(n for n in lighteval_table("mmlu") if n.startswith("mmlu:"))
    resolved = Registry().resolve(["leaderboard|mmlu|5"])
    assert [r.config.name for r in resolved.tasks] == expected
    assert len(expected) > 50 and {r.num_fewshot for r in resolved.tasks} == {5}


def test_metric_parameters_reach_a_copy_of_lighteval_s_metrics():
    original = lighteval_table("aime")["aime24"]
    names = [m.metric_name for m in original.metrics]
    [request] = Registry().resolve(["lighteval|aime24@n=4|0"]).tasks
    assert request.config.num_samples == 4
    assert request.config.filters == (("none", [("take_first_k", {"k": 4})]),)
    assert [m.metric_name for m in original.metrics] == names  # lighteval's own left alone


def test_a_file_of_task_strings_and_a_custom_suite(tmp_path):
    listing = tmp_path / "tasks.txt"
    listing.write_text(
        "# lighteval tasks\nlighteval|arc:challenge|0\nlighteval|math_500|0\n", "utf-8"
    )
    resolved = Registry().resolve([str(listing)])
    assert [r.config.name for r in resolved.tasks] == ["arc:challenge", "math_500"]
    [bare] = Registry().resolve(["extended|ifeval"]).tasks
    assert bare.num_fewshot is None and bare.config.num_fewshots == 0
    with pytest.raises(TaskConfigError, match="no lighteval task 'nope' in the --custom-tasks"):
        Registry().resolve(["custom|nope|0"])
    with pytest.raises(TaskConfigError, match="lighteval has no task 'no_such_task'"):
        Registry().resolve(["lighteval|no_such_task|0"])


def test_one_name_from_two_sources_in_one_run_is_refused():
    with pytest.raises(TaskConfigError, match="already in this run"):
        Registry().resolve(["lighteval|arc:easy|0", "lighteval|arc:easy|5"])


ARC_ROWS = [
    {
        "id": f"q{i}",
        "question": f"Which of these is a {kind}?",
        "choices": {
            "text": ["a rock", "a cat", "the sun", "a song"],
            "label": ["A", "B", "C", "D"],
        },
        "answerKey": "ABCD"[i % 4],
    }
    for i, kind in enumerate(["mammal", "star", "mineral", "tune", "pet", "planet"])
]


def test_lighteval_s_arc_easy_runs_over_its_hub_dataset_offline(
    tmp_path, tiny_model_dir, monkeypatch
):
    from lighteval.tasks.lighteval_task import LightevalTask
    from lighteval.tasks.prompt_manager import PromptManager

    cache = tmp_path / "hf-datasets"
    write_hub_dataset(cache, "allenai/ai2_arc", "ARC-Easy", {"train": ARC_ROWS, "test": ARC_ROWS})
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "src"),
        "HF_DATASETS_CACHE": str(cache),
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
    }
    out = tmp_path / "out"
    command = [
        sys.executable, "-m", "assay", "run", "--model", "hf",
        "--model-args", f"pretrained={tiny_model_dir},dtype=float32",
        "--tasks", "lighteval|arc:easy|2", "--output-dir", str(out), "--log-samples", "--no-progress",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    samples = {s["doc_id"]: s for s in map(json.loads, (out / "samples_arc__easy.jsonl").open())}
    # lighteval's own docs of the same rows: its few-shot picks and its prompts.
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(cache))
    config = lighteval_table("arc")["arc:easy"]
    config.num_fewshots, config.full_name = 2, "arc:easy|2"
    docs = LightevalTask(config).get_docs()
    assert len(docs) == len(samples) == len(ARC_ROWS)
    for doc in docs:
        sample = samples[int(doc.id)]
        prompt = PromptManager().prepare_prompt(doc)
        arguments = list(sample["arguments"].values())
        assert [a["arg_0"] for a in arguments] == [prompt] * len(doc.choices)
        assert [a["arg_1"] for a in arguments] == doc.choices
        best = max(range(len(doc.choices)), key=lambda i: float(sample["resps"][i][0][0]))
        assert sample["acc"] == float(best == doc.gold_index)


def test_tasks_show_takes_lighteval_s_task_strings(tmp_path, monkeypatch):
    import datasets
    from lighteval.tasks.lighteval_task import LightevalTask
    from lighteval.tasks.prompt_manager import PromptManager

    from assay.cli.task_listing import show

    cache = tmp_path / "hf-datasets"
    write_hub_dataset(cache, "allenai/ai2_arc", "ARC-Easy", {"train": ARC_ROWS, "test": ARC_ROWS})
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(cache))
    text = show(Registry(), "lighteval|arc:easy|2")
    assert "task: arc:easy" in text and "shots: 2" in text
    config = lighteval_table("arc")["arc:easy"]
    config.num_fewshots, config.full_name = 2, "arc:easy|2"
    first = next(d for d in LightevalTask(config).get_docs() if d.id == "0")
    assert PromptManager().prepare_prompt(first) in text  # tasks show prints prompts as written
    with pytest.raises(ConfigError, match=r"names 5[0-9] tasks"):
        show(Registry(), "leaderboard|mmlu|0")


def test_judged_code_running_and_address_named_metrics():
    from assay.run.plan import check_task

    [mt_bench] = Registry().resolve(["lighteval|mt_bench|0"]).tasks
    with pytest.raises(ConfigError, match="judge model"):
        check_task(mt_bench.config, confirm_run_unsafe_code=True)
    [lcb] = Registry().resolve(["lighteval|lcb:codegeneration|0"]).tasks
    with pytest.raises(ConfigError, match="--confirm-run-unsafe-code"):
        check_task(lcb.config, confirm_run_unsafe_code=False)
    [algebra] = Registry().resolve(["lighteval|math:algebra|0"]).tasks
    [name] = [m.name for m in algebra.config.metrics]
    assert "normalize_pred=<function math_normalizer>" in name and " at 0x" not in name


def test_several_generations_per_doc_need_sampling(tmp_path):
    from assay.run.plan import check_tasks
    from assay.run.settings import RunSettings
    from assay.tasks.task import Task

    [request] = Registry().resolve(["lighteval|aime24@n=4|0"]).tasks
    task = Task(request.config)
    # A temperature alone keeps the task's do_sample=False (lm-eval's defaults): still greedy.
    for greedy in ({}, {"temperature": 0.6}):
        with pytest.raises(ConfigError, match="need 4 generations per doc, but decoding is greedy"):
            check_tasks(RunSettings(gen_kwargs=greedy), [task])
    check_tasks(RunSettings(gen_kwargs={"do_sample": True, "temperature": 0.6}), [task])
    [single] = Registry().resolve(["lighteval|aime24@n=1|0"]).tasks
    check_tasks(RunSettings(), [Task(single.config)])
    # On the command line: refused before any model or data loads.
    command = [
        sys.executable, "-m", "assay", "run", "--model", "hf",
        "--model-args", f"pretrained={tmp_path / 'no-such-model'}", "--tasks", "lighteval|aime24@n=4|0",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2 and "decoding is greedy" in done.stderr
    assert "Traceback" not in done.stderr and "no-such-model" not in done.stderr
