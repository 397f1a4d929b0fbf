"""What a new user meets in the first minutes: messages that say what is wrong first."""

from __future__ import annotations

from pathlib import Path

from assay.cli.main import main

TASK = """\
task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{q}}}}"
doc_to_target: "{{{{a}}}}"
metric_list:
  - metric: exact_match
"""


def write_tasks(folder: Path) -> Path:
    folder.mkdir()
    data = folder / "rows.jsonl"
    data.write_text('{"q": "1+1", "a": "2"}\n', encoding="utf-8")
    (folder / "one.yaml").write_text(TASK.format(name="one", data=data), encoding="utf-8")
    (folder / "tag.yaml").write_text(
        TASK.format(name="two", data=data) + "tag: solo_tag\n", encoding="utf-8"
    )
    return folder


def test_a_yaml_path_that_does_not_exist_says_no_such_file(tmp_path, capsys):
    assert main(["run", "--model", "dummy", "--tasks", str(tmp_path / "typo.yaml")]) == 2
    err = capsys.readouterr().err
    assert f"--tasks {tmp_path / 'typo.yaml'}: no such file" in err
    assert "Known tasks" not in err


def test_a_broken_yaml_is_named_before_the_list_of_known_tasks(tmp_path, capsys):
    folder = write_tasks(tmp_path / "tasks")
    (folder / "broken.yaml").write_text("task: broken\ndoc_to_text: [unclosed\n")
    argv = ["run", "--model", "dummy", "--include-path", str(folder), "--tasks", "broken"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "could not be read" in err and "Known tasks" in err
    assert err.index("could not be read") < err.index("Known tasks")


def test_a_tag_of_one_task_lists_1_task(tmp_path, capsys):
    folder = write_tasks(tmp_path / "tasks")
    assert main(["tasks", "list", "solo_tag", "--include-path", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "1 task" in out and "1 tasks" not in out


def test_check_integrity_points_to_a_validate_command_that_works(tmp_path, capsys):
    folder = write_tasks(tmp_path / "tasks")
    argv = ["run", "--model", "dummy", "--tasks", "one", "--include-path", str(folder)]
    assert main([*argv, "--check_integrity"]) == 2
    err = capsys.readouterr().err
    assert "`assay validate --tasks NAME`" in err
    assert main(["validate", "--tasks", "one", "--include-path", str(folder)]) == 0
