"""`assay tasks list`: tasks, groups and tags, filtered by a substring."""

from __future__ import annotations

import json

import pytest

from assay.cli.main import main

TASK = """\
task: {name}
tag: [{tag}]
dataset_path: json
dataset_kwargs: {{data_files: {{test: rows.jsonl}}}}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{q}}}}"
doc_to_target: 0
doc_to_choice: ["a", "b"]
"""


@pytest.fixture
def folder(tmp_path):
    for name in ("zeta_easy", "zeta_hard", "omega_one"):
        text = TASK.format(name=name, tag="zeta_tag" if name.startswith("zeta") else "omega_tag")
        (tmp_path / f"{name}.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "group.yaml").write_text(
        "group: zeta_suite\ntask: [zeta_easy, zeta_hard, omega_tag]\n", encoding="utf-8"
    )
    return tmp_path


def rows(capsys) -> dict[str, list[str]]:
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["name", "kind"]
    table = lines[1 : lines.index("")]  # the legend follows a blank line
    return {line.split()[0]: line.split()[1:] for line in table}


def test_list_shows_tasks_groups_and_tags_with_their_members(folder, capsys):
    assert main(["tasks", "list", "--include-path", str(folder)]) == 0
    listed = rows(capsys)
    assert listed["zeta_easy"][0] == "task" and listed["omega_one"][0] == "task"
    assert listed["zeta_suite"] == ["group", "3", "tasks"]
    assert listed["zeta_tag"] == ["tag", "2", "tasks"]
    assert listed["omega_tag"] == ["tag", "1", "task"]
    assert "arc_easy" in listed  # built-ins are listed too


def test_list_filters_by_a_substring_of_the_name(folder, capsys):
    assert main(["tasks", "list", "ZETA", "--include-path", str(folder)]) == 0
    assert sorted(rows(capsys)) == ["zeta_easy", "zeta_hard", "zeta_suite", "zeta_tag"]
    assert main(["tasks", "list", "no-such-thing", "--include-path", str(folder)]) == 0
    assert "no task, group or tag name contains 'no-such-thing'" in capsys.readouterr().out


LOCAL_ARC = """\
from dataclasses import replace

from assay.catalog.arc import TASKS_TABLE as BUILTIN

TASKS_TABLE = [
    replace(next(c for c in BUILTIN if c.name == "arc_easy"), hf_repo="json", hf_subset=None,
            hf_revision=None, hf_data_files={"test": "arc/test.jsonl", "train": "arc/test.jsonl",
                                             "validation": "arc/test.jsonl"})
]
"""


def test_show_renders_the_real_dataset_row_when_it_is_at_hand(tmp_path, capsys):
    (tmp_path / "arc").mkdir()
    row = {"id": "x1", "question": "Which gas do plants take in?", "answerKey": "B",
           "choices": {"text": ["Oxygen", "Carbon dioxide"], "label": ["A", "B"]}}  # fmt: skip
    (tmp_path / "arc" / "test.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    (tmp_path / "local_arc.py").write_text(LOCAL_ARC, encoding="utf-8")
    assert (
        main(["tasks", "show", "arc_easy", "--custom-tasks", str(tmp_path / "local_arc.py")]) == 0
    )
    shown = capsys.readouterr().out
    assert "doc 0: the task's dataset" in shown and "EXAMPLE" not in shown
    assert "\nQuestion: Which gas do plants take in?\nAnswer:\n" in shown


def test_show_labels_a_bundled_example_row_when_the_dataset_is_not_cached(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty_cache"))
    assert main(["tasks", "show", "arc_easy"]) == 0
    shown = capsys.readouterr().out
    assert "doc 0: a bundled EXAMPLE row" in shown and "── request 0: context" in shown


def test_show_previews_the_chat_prompt_a_run_would_send(folder, tiny_model_dir, capsys):
    from transformers import AutoTokenizer

    argv = ["tasks", "show", "zeta_easy", "--include-path", str(folder), "--apply-chat-template",
            "--system-instruction", "Be brief.", "--model-args", f"tokenizer={tiny_model_dir}"]  # fmt: skip
    (folder / "rows.jsonl").write_text('{"q": "Is the sky blue?"}\n', encoding="utf-8")
    assert main(argv) == 0
    shown = capsys.readouterr().out
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    expected = tokenizer.apply_chat_template(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Is the sky blue?"},
        ],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert expected in shown


def test_show_chat_template_needs_a_tokenizer(folder, capsys):
    assert (
        main(["tasks", "show", "zeta_easy", "--include-path", str(folder), "--apply-chat-template"])
        == 2
    )
    assert "--model-args tokenizer=" in capsys.readouterr().err
