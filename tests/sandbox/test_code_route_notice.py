"""The code-task notice says what runs: a module that holds code_eval but could run code
itself is not called sandboxed; --predict-only says nothing runs."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from assay.models.dummy import DummyLM
from assay.requests.types import GenerateRequest
from assay.run.api import evaluate
from assay.tasks.code_routes import code_route, code_runners, describe
from assay.tasks.registry import Registry

pytest.importorskip("evaluate")

UTILS = """\
import evaluate

compute_ = evaluate.load("code_eval")


def pass_at_1(references, predictions, **kwargs):
    {body}
"""
HONEST = "return compute_.compute(references=references, predictions=predictions, k=[1])[0]"
SNEAKY = "namespace = {}\n    exec(predictions[0][0], namespace)\n    return {'pass@1': 1.0}"

YAML = """\
task: {name}
dataset_path: json
output_type: generate_until
test_split: test
doc_to_text: "{{{{prompt}}}}"
doc_to_target: "{{{{test}}}}"
unsafe_code: true
metric_list:
  - metric: !function utils.pass_at_1
    aggregation: mean
    higher_is_better: true
"""


def load(tmp_path: Path, body: str):
    (tmp_path / "utils.py").write_text(UTILS.format(body=body))
    (tmp_path / "t.yaml").write_text(YAML.format(name="route_task"))
    return Registry([tmp_path], builtins=False).get("route_task")


def test_a_module_that_holds_code_eval_and_calls_exec_is_not_called_sandboxed(tmp_path):
    honest = code_route(load(tmp_path, HONEST))
    assert honest.route == "code_eval" and honest.runs_code == ()
    sneaky = code_route(load(tmp_path, SNEAKY))
    assert sneaky.route == "in_process" and not sneaky.sandboxed
    assert sneaky.runs_code == ("utils.py:8 exec",)
    line = describe("route_task", sneaky, "bwrap")
    assert "cannot show" in line and "NOT in the sandbox" in line
    assert "runs in the bwrap sandbox" not in line


def test_code_runners_sees_the_usual_ways_and_ignores_lookalikes(tmp_path):
    file = tmp_path / "m.py"
    file.write_text(
        textwrap.dedent(
            """\
            import re
            import subprocess
            import os
            pattern = re.compile("x")  # an attribute named compile: not a finding
            def f(x):
                os.system(x)
                return eval(x)
            """
        )
    )
    assert code_runners(str(file)) == ["m.py:2 subprocess", "m.py:6 system", "m.py:7 eval"]


def test_code_runners_sees_exec_under_another_spelling(tmp_path):
    file = tmp_path / "m.py"
    file.write_text(
        textwrap.dedent(
            """            import builtins
            def f(x, name):
                getattr(builtins, "ex" + "ec")(x, {})
                getattr(x, name)
                return getattr(x, "shape", None)
            """
        )
    )
    assert code_runners(str(file)) == [
        "m.py:1 builtins", "m.py:3 getattr", "m.py:4 getattr"
    ]  # fmt: skip


BUILTIN = """\
from dataclasses import replace

from assay.catalog.humaneval import TASKS_TABLE as HUMANEVAL

TASKS_TABLE = [
    replace(c, name="example_" + c.name, hf_repo=None,
            dataset_loader=lambda c=c, **_: {"test": list(c.example_rows)})
    for c in HUMANEVAL[:1]
]
"""


class Never(DummyLM):
    def generate_until(self, requests: Sequence[GenerateRequest]) -> list[str]:
        return ["    import os\n    os._exit(0)\n" for _ in requests]


def test_predict_only_says_nothing_runs(tmp_path, capsys):
    tasks = tmp_path / "tasks.py"
    tasks.write_text(BUILTIN)
    evaluate(
        Never(),
        "example_humaneval",
        custom_tasks=tasks,
        confirm_run_unsafe_code=True,
        predict_only=True,
        sandbox="none",
        output_dir=tmp_path / "out",
        cache=False,
        show_progress=False,
    )
    err = capsys.readouterr().err
    assert "--predict-only: nothing is scored, so no model-written code runs" in err
    assert "runs in the" not in err and "in this process" not in err
