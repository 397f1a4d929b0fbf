"""lm-eval's own packaged task tree, indexed by assay and by lm-eval: the same names and members.

Runs when lm-eval is installed (`make test` installs the lm-eval-tasks extra). lm-eval's side
comes from its own TaskManager (tests/fixtures/lm_eval_index.py, in a subprocess).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from assay.tasks.registry import Registry

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("lm_eval") is None, reason="needs the lm-eval-tasks extra"
    ),
]

# lm-eval 0.4.13 gives every leaf of a group the name of the `{task: <group>, ...}` entry that
# named the group with overrides, so openllm's `{task: mmlu, num_fewshot: 5}` collapses mmlu's
# 57 subtasks into one task called "mmlu" (truthfulqa's three into one "truthfulqa"). assay
# runs the subtasks.
LM_EVAL_COLLAPSES = {"openllm": {"mmlu", "truthfulqa"}}


@pytest.fixture(scope="module")
def lm_eval_index(tmp_path_factory):
    out = tmp_path_factory.mktemp("lm_eval") / "index.json"
    script = Path(__file__).parents[1] / "fixtures" / "lm_eval_index.py"
    subprocess.run([sys.executable, str(script), "--out", str(out)], check=True, timeout=900)
    return json.loads(out.read_text())


def test_every_name_of_lm_evals_tree_is_known_with_the_same_kind_file_and_members(
    lm_eval_index,
):
    import lm_eval

    tree = Path(lm_eval.__file__).parent / "tasks"
    reg = Registry([tree])
    entries = reg.yaml_entries()
    assert set(entries) == set(lm_eval_index)  # nothing missing, no junk names
    wrong = {}
    for name, ref in lm_eval_index.items():
        got = (reg.kind(name), reg.source(name))
        if got != (ref["kind"], ref["file"]):
            wrong[name] = (got, (ref["kind"], ref["file"]))
            continue
        if ref["members"] is None:
            continue
        members = set(reg.members(name))
        for collapsed in LM_EVAL_COLLAPSES.get(name, ()):
            members = (members - set(reg.members(collapsed))) | {collapsed}
        if members != set(ref["members"]):
            wrong[name] = sorted(members ^ set(ref["members"]))[:10]
    assert not wrong


def test_the_include_path_lm_eval_names_the_installed_tree():
    import lm_eval

    reg = Registry(["lm-eval"])
    tree = (Path(lm_eval.__file__).parent / "tasks").resolve()
    assert reg.source("arc_easy") == str(tree / "arc" / "arc_easy.yaml")
    assert reg.kind("mmlu") == "group" and len(reg.members("mmlu")) == 57
