"""The include-path index: every YAML shape lm-eval's tree uses, names, members, serving files.

The miniature tree below holds one of each shape that the line-sniffing index of old got
wrong. Expected names and members are written out by hand from the tree; when lm-eval is
installed, its own TaskManager indexes the same tree and must agree.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from assay.tasks import index as index_module
from assay.tasks.registry import Registry

BODY = """\
dataset_path: json
dataset_kwargs:
  data_files:
    test: data.jsonl
test_split: test
doc_to_text: "{{q}}"
doc_to_target: "{{a}}"
"""

TREE = {
    # quoted keys, as lm-eval's generated YAMLs write them
    "quoted/q_one.yaml": '"task": "q_one"\n"tag": "quoted_tag"\n"include": "../_base.yaml"\n',
    "quoted/q_two.yaml": "'task': 'q_two'\n'tag': 'quoted_tag'\n'include': '../_base.yaml'\n",
    # block list of tags, with comments around it
    "block.yaml": "# BBH\ntask: block_task  # trailing comment\ntag:\n  - blk_a\n  # a comment in the list\n  - blk_b\ninclude: _base.yaml\n",
    # flow list of tags
    "flow.yaml": "task: flow_task\ntag: [blk_a, flow_tag]\ninclude: _base.yaml\n",
    # include chain: the tag and output_type come from two levels up
    "chain/_base_mc.yaml": "tag: chained\noutput_type: multiple_choice\ndoc_to_choice: ['x', 'y']\ninclude: ../_base.yaml\n",
    "chain/_mid.yaml": "include: _base_mc.yaml\ndataset_name: mid\n",
    "chain/leaf_a.yaml": "task: leaf_a\ninclude: _mid.yaml\n",
    "chain/leaf_b.yaml": "include: _mid.yaml\ntask: leaf_b\n",
    # a template with no task: names nothing
    "_base.yaml": BODY,
    # a group whose members are a tag, a task with overrides, an inline task, an inline group
    "groups/_grp.yaml": textwrap.dedent(
        """\
        group: grp
        task:
          - quoted_tag
          - task: block_task
            num_fewshot: 2
          - task: inline_task
            dataset_path: json
            dataset_kwargs:
              data_files:
                test: ../data.jsonl
            test_split: test
            doc_to_text: "{{q}}"
            doc_to_target: "{{a}}"
          - group: inner
            task:
              - leaf_a
              - chained
        aggregate_metric_list:
          - metric: exact_match
            aggregation: mean
            weight_by_size: true
        """
    ),
    # a group that nests another group by name
    "groups/outer.yaml": "group: outer\ntask:\n  - grp\n  - flow_task\n",
    # a duplicate task name: the first file in path order keeps it
    "zz/dup.yaml": "task: flow_task\ninclude: ../_base.yaml\n",
    # notebook checkpoints are not part of the tree
    ".ipynb_checkpoints/ghost.yaml": "task: ghost\ninclude: ../_base.yaml\n",
    # a task named like assay's built-in, and a tag named like a built-in tag
    "shadow/arc_easy.yaml": "task: arc_easy\ntag: math_word_problems\ninclude: ../_base.yaml\n",
}

EXPECTED = {
    "q_one": ("task", "quoted/q_one.yaml", None),
    "q_two": ("task", "quoted/q_two.yaml", None),
    "quoted_tag": ("tag", None, ["q_one", "q_two"]),
    "block_task": ("task", "block.yaml", None),
    "flow_task": ("task", "flow.yaml", None),
    "blk_a": ("tag", None, ["block_task", "flow_task"]),
    "blk_b": ("tag", None, ["block_task"]),
    "flow_tag": ("tag", None, ["flow_task"]),
    "leaf_a": ("task", "chain/leaf_a.yaml", None),
    "leaf_b": ("task", "chain/leaf_b.yaml", None),
    "chained": ("tag", None, ["leaf_a", "leaf_b"]),
    "grp": (
        "group",
        "groups/_grp.yaml",
        ["block_task", "grp::inline_task", "leaf_a", "leaf_b", "q_one", "q_two"],
    ),
    "outer": (
        "group",
        "groups/outer.yaml",
        ["block_task", "flow_task", "grp::inline_task", "leaf_a", "leaf_b", "q_one", "q_two"],
    ),
    "arc_easy": ("task", "shadow/arc_easy.yaml", None),
    "math_word_problems": ("tag", None, ["arc_easy"]),
}


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_TASK_INDEX_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "tree"
    for rel, text in TREE.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / "data.jsonl").write_text(json.dumps({"q": "2+2", "a": "4"}) + "\n", encoding="utf-8")
    return root


def test_every_yaml_shape_gives_exactly_the_names_lm_eval_gives(tree):
    reg = Registry([tree], builtins=False)
    entries = reg.yaml_entries()
    assert set(entries) == set(EXPECTED)
    for name, (kind, file, members) in EXPECTED.items():
        assert entries[name].kind == kind, name
        expected_file = str((tree / file).resolve()) if file else None
        assert entries[name].file == expected_file, name
        if members is not None:
            assert reg.members(name) == members, name
    (index,) = reg.folder_indexes()
    assert list(index.shadowed) == [str((tree / "zz/dup.yaml").resolve())]
    assert not index.broken
    assert entries["leaf_a"].output_type == "multiple_choice"


def test_the_include_path_wins_over_built_ins_and_says_which_file(tree, caplog):
    reg = Registry([tree])
    with caplog.at_level(logging.WARNING, logger="assay.tasks.registry"):
        config = reg.get("arc_easy")
        tagged = [t.config.name for t in reg.resolve(["math_word_problems"]).tasks]
        reg.get("arc_easy")
    assert config.source == str((tree / "shadow/arc_easy.yaml").resolve())
    assert tagged == ["arc_easy"]  # the built-in tag's tasks (gsm8k ...) are not mixed in
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2  # one line per name, not per lookup
    assert "shadow/arc_easy.yaml" in lines[0] and "built-in task" in lines[0]
    assert "math_word_problems" in lines[1] and "built-in tag" in lines[1]


def test_groups_run_tags_inline_tasks_and_pushed_down_settings(tree):
    resolved = Registry([tree], builtins=False).resolve(["outer"])
    names = [t.config.name for t in resolved.tasks]
    assert sorted(names) == EXPECTED["outer"][2]
    by_name = {t.config.name: t.config for t in resolved.tasks}
    assert by_name["block_task"].num_fewshots == 2
    assert by_name["grp::inline_task"].hf_repo == "json"
    groups = {g.config.name: g.children for g in resolved.groups}
    # A tag adds its tasks as the group's own children, as lm-eval does.
    assert groups["grp::inner"] == ["leaf_a", "leaf_b"]
    assert groups["grp"] == ["q_one", "q_two", "block_task", "grp::inline_task", "grp::inner"]


def test_a_later_include_path_overrides_an_earlier_one(tree, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.yaml").write_text(
        "task: q_one\ntag: quoted_tag\n" + BODY.replace("data.jsonl", "../tree/data.jsonl"),
        encoding="utf-8",
    )
    reg = Registry([tree, other], builtins=False)
    assert reg.source("q_one") == str((other / "x.yaml").resolve())
    # lm-eval replaces a name's entry whole: the tag is the later folder's alone.
    assert reg.members("quoted_tag") == ["q_one"]


def test_the_index_is_cached_and_refreshed_when_a_file_or_an_include_changes(tree, monkeypatch):
    calls = []
    real = index_module._record
    monkeypatch.setattr(index_module, "_record", lambda p, *a: calls.append(p) or real(p, *a))
    index_module.build_folder_index(tree)
    first = len(calls)
    assert first == len([r for r in TREE if not r.startswith(".ipynb")])
    calls.clear()
    index_module.build_folder_index(tree)
    assert calls == []  # nothing changed: every record comes from the cache
    base = tree / "chain/_base_mc.yaml"
    base.write_text(base.read_text().replace("tag: chained", "tag: rechained"))
    os.utime(base, ns=(1, 1))
    index = index_module.build_folder_index(tree)
    changed = sorted(Path(p).name for p in calls)
    assert changed == ["_base_mc.yaml", "_mid.yaml", "leaf_a.yaml", "leaf_b.yaml"]
    assert index.entries["rechained"].members == ["leaf_a", "leaf_b"]
    assert "chained" not in index.entries


def _lm_eval_importable() -> bool:
    import importlib.util

    return importlib.util.find_spec("lm_eval") is not None


@pytest.mark.skipif(not _lm_eval_importable(), reason="needs the lm-eval-tasks extra")
def test_lm_eval_indexes_the_miniature_tree_the_same_way(tree, tmp_path):
    out = tmp_path / "ref.json"
    script = Path(__file__).parents[1] / "fixtures" / "lm_eval_index.py"
    subprocess.run(
        [
            sys.executable,
            str(script),
            "--include-path",
            str(tree),
            "--no-defaults",
            "--out",
            str(out),
        ],
        check=True,
        timeout=300,
    )
    ref = json.loads(out.read_text())
    reg = Registry([tree], builtins=False)
    assert set(ref) == set(reg.yaml_entries())
    for name, record in ref.items():
        assert record["kind"] == reg.kind(name), name
        assert record["file"] == reg.source(name), name
        if record["members"] is not None:
            assert record["members"] == reg.members(name), name


def test_the_lm_eval_include_path_without_lm_eval_names_the_extra(monkeypatch, tmp_path):
    import importlib.util

    from assay.errors import TaskConfigError

    monkeypatch.chdir(tmp_path)  # no folder called lm-eval here
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "lm_eval" else real(name, *a)
    )
    with pytest.raises(TaskConfigError, match=r"assay\[lm-eval-tasks\]"):
        Registry(["lm-eval"])


def test_group_level_settings_are_pushed_down_to_every_member(tree):
    (tree / "groups/pushed.yaml").write_text(
        "group: pushed\ntag: ignored_on_groups\nfewshot_split: test\nnum_fewshot: 3\n"
        "metric_list:\n  - metric: exact_match\n    ignore_case: true\n"
        "task:\n  - q_one\n  - task: leaf_b\n    num_fewshot: 1\n",
        encoding="utf-8",
    )
    reg = Registry([tree], builtins=False)
    assert reg.kind("ignored_on_groups") is None  # a group's tag names nothing (lm-eval)
    configs = {t.config.name: t.config for t in reg.resolve(["pushed"]).tasks}
    assert configs["q_one"].num_fewshots == 3 and configs["leaf_b"].num_fewshots == 1
    for config in configs.values():
        assert config.few_shots_split == "test"
    assert [(m.name, m.kwargs) for m in configs["q_one"].metrics] == [
        ("exact_match", {"ignore_case": True})
    ]
    # leaf_b is multiple_choice, where lm-eval reads no metric options.
    assert [(m.name, m.kwargs) for m in configs["leaf_b"].metrics] == [("exact_match", {})]
    # Named alone, the tasks keep their own settings.
    assert reg.get("q_one").num_fewshots == 0
