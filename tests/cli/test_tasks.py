"""`assay tasks list`: tasks, groups and tags, filtered by a substring."""

from __future__ import annotations

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
    return {line.split()[0]: line.split()[1:] for line in lines[1:]}


def test_list_shows_tasks_groups_and_tags_with_their_members(folder, capsys):
    assert main(["tasks", "list", "--include-path", str(folder)]) == 0
    listed = rows(capsys)
    assert listed["zeta_easy"][0] == "task" and listed["omega_one"][0] == "task"
    assert listed["zeta_suite"] == ["group", "3", "tasks"]
    assert listed["zeta_tag"] == ["tag", "2", "tasks"]
    assert listed["omega_tag"] == ["tag", "1", "tasks"]
    assert "arc_easy" in listed  # built-ins are listed too


def test_list_filters_by_a_substring_of_the_name(folder, capsys):
    assert main(["tasks", "list", "ZETA", "--include-path", str(folder)]) == 0
    assert sorted(rows(capsys)) == ["zeta_easy", "zeta_hard", "zeta_suite", "zeta_tag"]
    assert main(["tasks", "list", "no-such-thing", "--include-path", str(folder)]) == 0
    assert "no task, group or tag name contains 'no-such-thing'" in capsys.readouterr().out
