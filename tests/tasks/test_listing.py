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
    assert lines[0].split() == ["task", "family", "output", "type", "shots"]
    assert any(line.startswith("shown ") and "(parsed when used)" in line for line in lines)
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
