"""`assay tasks list / show / dump` output from the registry."""

from __future__ import annotations

import json

from assay.tasks import listing
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
    assert lines[0].split() == ["name", "kind", "family", "output", "type", "/", "members", "shots"]
    assert any(line.split()[:4] == ["shown", "task", "yaml", "multiple_choice"] for line in lines)
    assert len(lines) > 2  # the built-in catalog is listed too


def test_show_renders_one_prompt_with_its_requests(tmp_path):
    text = listing.show(Registry([folder_with_task(tmp_path)]), "shown", None)
    assert "task: shown" in text and "output type: multiple_choice" in text
    assert '"arg_0": "Q: sky?\\nA:"' in text
    assert '"arg_1": " blue"' in text and '"arg_1": " other"' in text


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
    settings = json.loads(shown.split("--- request 0\n", 1)[1])["arg_1"]
    assert settings["max_gen_toks"] == 7 and settings["until"] == ["END"]
    shown = listing.show(registry, "per_doc", None)
    assert json.loads(shown.split("--- request 0\n", 1)[1])["arg_1"]["until"] == ["DOC"]


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
