"""Registry: lazy YAML index, tags, groups, task strings, custom task files."""

from __future__ import annotations

import logging
import textwrap

import pytest

from assay.errors import TaskConfigError, UnknownNameError
from assay.tasks.lm_eval_yaml import GroupConfig
from assay.tasks.registry import Registry

TASK = """\
task: {name}
dataset_path: json
test_split: test
doc_to_text: "{{{{q}}}}"
doc_to_target: a
"""


def write(folder, name, text):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def folder(tmp_path):
    write(tmp_path, "one.yaml", TASK.format(name="one") + "tag: [numbers, small]\n")
    write(tmp_path, "sub/two.yaml", TASK.format(name="two") + "tag: numbers\n")
    write(
        tmp_path,
        "group.yaml",
        """\
        group: both
        task: [one, two]
        aggregate_metric_list:
          - metric: exact_match
            weight_by_size: true
        """,
    )
    return tmp_path


def test_a_broken_yaml_is_left_out_of_the_index_and_named_when_asked_for(folder):
    write(folder, "broken.yaml", "task: broken\n  this: [is not: valid yaml\n")
    reg = Registry([folder], builtins=False)
    assert set(reg.names()) == {"one", "two", "both", "numbers", "small"}
    (index,) = reg.folder_indexes()
    assert list(index.broken) == [str((folder / "broken.yaml").resolve())]
    assert "YAML syntax error" in index.broken[str((folder / "broken.yaml").resolve())]
    with pytest.raises(UnknownNameError, match=r"broken\.yaml.*YAML syntax error"):
        reg.get("broken")


def test_tags_resolve_to_their_tasks(folder):
    resolved = Registry([folder], builtins=False).resolve(["numbers"])
    assert sorted(t.config.name for t in resolved.tasks) == ["one", "two"]
    small = Registry([folder], builtins=False).resolve(["small"])
    assert [t.config.name for t in small.tasks] == ["one"]


def test_tags_of_built_in_tasks_resolve_on_a_fresh_registry():
    # The first name asked for may be a tag of a Python task, before any lookup filled the index.
    (task,) = Registry().resolve(["siqa"]).tasks
    assert task.config.name == "social_iqa"
    names = [t.config.name for t in Registry().resolve(["math_word_problems"]).tasks]
    assert "gsm8k" in names


def test_groups_resolve_to_leaf_tasks_and_a_group_node(folder):
    resolved = Registry([folder], builtins=False).resolve(["both|3"])
    assert [t.config.name for t in resolved.tasks] == ["one", "two"]
    assert [t.num_fewshot for t in resolved.tasks] == [3, 3]
    (node,) = resolved.groups
    assert isinstance(node.config, GroupConfig)
    assert node.children == ["one", "two"]
    assert node.config.aggregate_metric_list[0]["weight_by_size"] is True


def test_a_task_named_twice_runs_once(folder):
    resolved = Registry([folder], builtins=False).resolve(["one", "both"])
    assert [t.config.name for t in resolved.tasks] == ["one", "two"]


@pytest.mark.parametrize(
    ("text", "message"), [("one|x", "number of few-shot"), ("|2", "empty task name")]
)
def test_bad_task_strings(folder, text, message):
    with pytest.raises(TaskConfigError, match=message):
        Registry([folder], builtins=False).resolve([text])


def test_unknown_names_list_known_ones(folder):
    with pytest.raises(UnknownNameError) as err:
        Registry([folder], builtins=False).resolve(["onee"])
    assert "one" in str(err.value)


def test_missing_include_path_is_reported(tmp_path):
    with pytest.raises(TaskConfigError, match="no such directory"):
        Registry([tmp_path / "nope"])


def test_a_yaml_file_path_is_a_task_string(folder):
    resolved = Registry([], builtins=False).resolve([str(folder / "sub" / "two.yaml")])
    assert resolved.tasks[0].config.name == "two"


CUSTOM = """
from assay import Doc, TaskConfig

def prompt(row, task_name):
    return Doc(row["q"], choices=[row["a"]], gold_index=0)

TASKS_TABLE = [
    TaskConfig(name="mine", prompt_function=prompt, hf_repo="json", metrics=["exact_match"],
               tags=["custom_tag"]),
]
"""


def test_custom_task_files_define_tasks_table(tmp_path):
    path = write(tmp_path, "my_tasks.py", CUSTOM)
    reg = Registry([], [path], builtins=False)
    assert reg.get("mine").source == str(path)
    assert [t.config.name for t in reg.resolve(["custom_tag"]).tasks] == ["mine"]
    bad = write(tmp_path, "bad.py", "X = 1\n")
    with pytest.raises(TaskConfigError, match="TASKS_TABLE"):
        Registry([], [bad], builtins=False).get("x")


def test_relative_data_files_of_a_task_file_resolve_against_its_folder(tmp_path, monkeypatch):
    from assay.tasks.task import Task

    folder = tmp_path / "project"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "rows.jsonl").write_text('{"q": "x", "a": "y"}\n', encoding="utf-8")
    code = CUSTOM.replace(
        'hf_repo="json",', 'hf_repo="json", hf_data_files={"validation": "data/rows.jsonl"},'
    )
    path = write(folder, "tasks.py", code)
    monkeypatch.chdir(tmp_path)  # the working directory has no data/ folder
    config = Registry([], [path], builtins=False).get("mine")
    assert config.hf_data_files == {"validation": str(folder / "data" / "rows.jsonl")}
    assert Task(config).eval_rows()[0] == {"q": "x", "a": "y"}


def test_include_paths_win_over_builtins(tmp_path):
    builtin = sorted(Registry().python_configs())[0]
    write(tmp_path, "shadow.yaml", TASK.format(name=builtin))
    found = Registry([tmp_path]).get(builtin)
    assert found.source.endswith("shadow.yaml")


def test_a_custom_task_files_module_name_is_the_same_in_every_process(tmp_path):
    """The name reaches results.json: two runs of the same command must write the same one."""
    import subprocess
    import sys

    path = tmp_path / "my_tasks.py"
    path.write_text("TASKS_TABLE = []\n")
    code = (
        "import sys; from assay.tasks.registry import _import_file; "
        "print(_import_file(__import__('pathlib').Path(sys.argv[1])).__name__)"
    )
    names = {
        subprocess.run(
            [sys.executable, "-c", code, str(path)],
            capture_output=True,
            text=True,
            check=True,
            env={**__import__("os").environ, "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert len(names) == 1 and names.pop().startswith("assay_custom_tasks_")


SHADOW_GSM8K = """
from dataclasses import replace

from assay.catalog.gsm8k import TASKS_TABLE as GSM8K

TASKS_TABLE = [replace(GSM8K[0], source="")]
"""


def test_a_custom_task_file_overriding_a_built_in_says_so_once(tmp_path, caplog):
    path = write(tmp_path, "shadow.py", SHADOW_GSM8K)
    name = "gsm8k"
    reg = Registry([], [path])
    with caplog.at_level(logging.WARNING, logger="assay.tasks.registry"):
        config = reg.get(name)
        reg.get(name)
    assert config.source == str(path)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        f"'gsm8k' is served by {path} (--custom-tasks), not by assay's built-in task of that name."
    ]
    # A custom file's own new task is no override: nothing said.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="assay.tasks.registry"):
        Registry([], [write(tmp_path, "mine.py", CUSTOM)]).get("mine")
    assert caplog.records == []
