"""`assay tasks list / show / dump` output from the registry."""

from __future__ import annotations

import json

from assay.cli import task_listing as listing
from assay.tasks.registry import Registry

YAML = """\
task: shown
dataset_path: json
dataset_kwargs:
  data_files:
    test: data.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "Q: {{q}}\\nA:"
doc_to_target: 0
doc_to_choice: "{{[a, 'other']}}"
"""


def folder_with_task(tmp_path):
    (tmp_path / "shown.yaml").write_text(YAML, encoding="utf-8")
    (tmp_path / "data.jsonl").write_text(
        json.dumps({"q": "sky?", "a": "blue"}) + "\n", encoding="utf-8"
    )
    return tmp_path


def test_list_shows_builtins_and_yaml_names_without_parsing(tmp_path):
    reg = Registry([folder_with_task(tmp_path)])
    table = listing.list_table(reg)
    lines = table.splitlines()
    assert lines[0].split() == [
        *("name", "kind", "family", "output", "type", "/", "members", "shots", "data", "offline")
    ]
    # A YAML task's shots (lm-eval's 0 when unwritten) and its local data files, found.
    assert ["shown", "task", "yaml", "multiple_choice", "0", "local"] in [
        line.split() for line in lines
    ]
    assert lines[-1].startswith("data offline: local = data files here")
    assert len(lines) > 2  # the built-in catalog is listed too


def test_show_renders_one_prompt_with_its_requests(tmp_path):
    text = listing.show(Registry([folder_with_task(tmp_path)]), "shown", None)
    assert "task: shown" in text and "output type: multiple_choice" in text
    assert "── request 0: context ─" in text and "\nQ: sky?\nA:\n" in text
    assert "continuation scored: ' blue'" in text and "continuation scored: ' other'" in text
    assert (
        "target (what the metrics compare with)" in text
        and "filters:\n  none: take_first()" in text
    )


def test_dump_is_json_with_modules_docstrings_and_configs():
    modules = json.loads(listing.dump(Registry()))
    assert modules and all({"module", "docstring", "tasks"} <= set(m) for m in modules)
    task = modules[0]["tasks"][0]
    assert {"name", "hf_repo", "evaluation_splits", "metrics", "output_type"} <= set(task)


def test_show_renders_a_python_tasks_generation_settings_as_a_run_does(tmp_path):
    path = tmp_path / "gen_tasks.py"
    path.write_text(
        "from assay import Doc, TaskConfig\n"
        "def prompt(row, name):\n"
        "    return Doc(row['q'], [row['a']], stop_sequences=row.get('stop'))\n"
        "def make(name, rows):\n"
        "    return TaskConfig(name=name, prompt_function=prompt, metrics=['exact_match'],\n"
        "        dataset_loader=lambda **_: {'validation': rows}, generation_size=7,\n"
        "        stop_sequence=['END'])\n"
        "TASKS_TABLE = [make('task_defaults', [{'q': 'q', 'a': 'a'}]),\n"
        "    make('per_doc', [{'q': 'q', 'a': 'a', 'stop': ['DOC']}])]\n",
        encoding="utf-8",
    )
    registry = Registry([], [path], builtins=False)
    shown = listing.show(registry, "task_defaults", None)
    settings = json.loads(shown.split("── request 0: generation settings ", 1)[1].splitlines()[1])
    assert settings["max_gen_toks"] == 7 and settings["until"] == ["END"]
    shown = listing.show(registry, "per_doc", None)
    tail = shown.split("── request 0: generation settings ", 1)[1]
    assert json.loads(tail.splitlines()[1])["until"] == ["DOC"]


def test_dump_includes_yaml_tasks_with_their_resolved_config(tmp_path):
    folder = folder_with_task(tmp_path)
    (folder / "child.yaml").write_text("include: shown.yaml\ntask: child\n", encoding="utf-8")
    modules = json.loads(listing.dump(Registry([folder])))
    by_name = {t["name"]: (m["module"], t) for m in modules for t in m["tasks"]}
    module, child = by_name["child"]
    assert module == str(folder / "child.yaml")
    assert child["output_type"] == "multiple_choice" and child["hf_repo"] == "json"
    assert child["config"]["task"] == "child"
    assert child["config"]["doc_to_text"] == "Q: {{q}}\nA:"  # inherited through include
    assert "shown" in by_name and "arc_easy" in by_name  # built-ins are still dumped


def test_a_bundled_example_row_is_never_among_its_own_few_shot_examples(monkeypatch, tmp_path):
    # gsm8k draws its shots from train; with the dataset not at hand both splits are the
    # bundled rows, and the shown doc is left out of its own examples (lm-eval's same-split rule).
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "none"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "none"))
    shown = listing.show(Registry(), "gsm8k", None)
    assert "a bundled EXAMPLE row" in shown
    prompt = shown.split("── request 0: prompt ", 1)[1].split("── request 0: generation")[0]
    question = prompt.rsplit("Question: ", 1)[1].splitlines()[0]
    assert prompt.count("Question: " + question) == 1


def test_data_at_hand_labels(monkeypatch, tmp_path):
    from assay.tasks.data_at_hand import data_at_hand

    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    (tmp_path / "hub" / "datasets--org--cached_set").mkdir(parents=True)
    (tmp_path / "rows.jsonl").write_text("{}\n", encoding="utf-8")
    assert data_at_hand("org/cached_set") == "cached"
    assert data_at_hand("org/elsewhere") == "hub"
    assert data_at_hand("json", {"test": str(tmp_path / "rows.jsonl")}) == "local"
    assert data_at_hand("json", {"test": [str(tmp_path / "gone.jsonl")]}) == "missing"
    assert data_at_hand(None) == ""


def _sampling_tasks(tmp_path):
    path = tmp_path / "sampled.py"
    path.write_text(
        "from assay import Doc, TaskConfig\n"
        "TASKS_TABLE = [TaskConfig(name='sampled', metrics=['exact_match'],\n"
        "    prompt_function=lambda row, name: Doc(row['q'], [row['a']]),\n"
        "    dataset_loader=lambda **_: {'validation': [{'q': f'q{i}', 'a': 'a'} for i in range(6)]},\n"
        "    few_shots_split='validation', generation_kwargs={'do_sample': True})]\n",
        encoding="utf-8",
    )
    return Registry([], [path], builtins=False)


def test_show_builds_the_requests_a_run_sends(tmp_path):
    """`tasks show` and `assay run` plan requests through one function: the shown prompt and
    generation settings (the run's default --seed seeds sampling) are the run's."""
    from assay.models.dummy import DummyLM
    from assay.requests.build import build_requests
    from assay.requests.plan import Capabilities
    from assay.run.evaluation import Evaluation
    from assay.run.plan import plan_task
    from assay.run.settings import RunSettings

    registry = _sampling_tasks(tmp_path)
    shown = listing.show(registry, "sampled", None)
    evaluation = Evaluation(registry.resolve(["sampled"]), RunSettings(model="dummy"))
    task = evaluation.tasks[0]
    plan = plan_task(task, evaluation.scorers[task.name], evaluation.settings, Capabilities())
    _, doc = next(task.docs([0]))
    request = build_requests(plan.requests, doc, Capabilities.of(DummyLM()))[0].request
    tail = shown.split("── request 0: generation settings ", 1)[1]
    assert json.loads(tail.splitlines()[1]) == request.params.as_dict()
    assert request.params.seed == RunSettings().seed.torch == 1234


def test_show_takes_a_task_strings_count_over_num_fewshot_as_a_run_does(tmp_path):
    registry = _sampling_tasks(tmp_path)
    shown = listing.show(registry, "sampled|2", listing.ShowSettings(num_fewshot=1))
    assert "shots: 2" in shown.splitlines()
