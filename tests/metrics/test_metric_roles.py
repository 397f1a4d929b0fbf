"""Metrics declare their role at registration (the output type a task using them defaults to,
whether a judge grades them); the other layers ask the registry and list no metric names."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import assay
from assay.doc import Doc, OutputType
from assay.metrics import METRICS, get_metric, judge_metric_names, metric_role, register_metric
from assay.metrics import base as metrics_base
from assay.metrics.base import Metric
from assay.metrics.judges.grading import JudgeMetric
from assay.tasks.config import TaskConfig

ROOT = Path(assay.__file__).parent


def config(metrics: list[str]) -> TaskConfig:
    return TaskConfig(
        name="t", prompt_function=lambda row, task: Doc("q"), hf_repo="json", metrics=metrics
    )


_SCRATCH = ("my_new_metric", "rolls", "generates")


@pytest.fixture
def scratch_registry():
    """The test's own metrics are forgotten after it (modules it imports stay registered)."""
    yield
    for name in _SCRATCH:
        METRICS._entries.pop(name, None)
        metrics_base._ROLES.pop(name, None)


def _factory(name: str):
    def build() -> Metric:
        return Metric(name, lambda sample: 0.0, "mean", True)

    return build


@pytest.mark.usefixtures("scratch_registry")
@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        ({}, OutputType.MULTIPLE_CHOICE),
        ({"output_type": OutputType.GENERATE_UNTIL}, OutputType.GENERATE_UNTIL),
        ({"output_type": OutputType.LOGLIKELIHOOD_ROLLING}, OutputType.LOGLIKELIHOOD_ROLLING),
        ({"output_type": OutputType.GENERATE_UNTIL, "judge": True}, OutputType.GENERATE_UNTIL),
    ],
)
def test_a_new_metric_s_declared_output_type_is_its_task_s(declared, expected):
    register_metric("my_new_metric", **declared)(_factory("my_new_metric"))
    assert config(metrics=["my_new_metric"]).resolved_output_type is expected
    assert metric_role("my_new_metric").judge is declared.get("judge", False)
    assert ("my_new_metric" in judge_metric_names()) is declared.get("judge", False)


@pytest.mark.usefixtures("scratch_registry")
def test_a_rolling_metric_wins_over_a_generative_one():
    register_metric("rolls", output_type=OutputType.LOGLIKELIHOOD_ROLLING)(_factory("rolls"))
    register_metric("generates", output_type=OutputType.GENERATE_UNTIL)(_factory("generates"))
    assert config(metrics=["generates", "rolls"]).resolved_output_type is (
        OutputType.LOGLIKELIHOOD_ROLLING
    )


def test_an_unknown_name_has_the_default_role():
    assert metric_role("no_such_metric_anywhere").output_type is None
    assert metric_role("no_such_metric_anywhere").judge is False


def test_the_judge_metrics_are_the_ones_that_build_judge_metrics():
    judges = judge_metric_names()
    assert {"judge_score", "judge_mt_bench"} <= set(judges)
    for name in judges:
        assert isinstance(get_metric(name), JudgeMetric), name
    assert not isinstance(get_metric("exact_match"), JudgeMetric)
    assert "exact_match" not in judges


def test_every_lazily_declared_metric_is_registered_by_its_module():
    for name in METRICS.names():
        if name in METRICS._lazy or name in METRICS._entries:
            METRICS.get(name)
            assert name in METRICS._entries, name


# Where naming several metrics is the point: a metric module registering and documenting its
# own metrics, a built-in task choosing its metric_list, and lm-eval's default metrics per output
# type (its own list, copied as it is).
_MAY_NAME_METRICS = ("metrics/", "catalog/")
_LM_EVAL_DEFAULTS = "DEFAULT_METRICS"


def _metric_name_lists() -> list[str]:
    """Each literal outside a metric's registration that names three or more registered metrics
    (a list, a set, a tuple, or the text of a message or help), by file and line."""
    names = set(METRICS.names())
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        where = path.relative_to(ROOT).as_posix()
        if where.startswith(_MAY_NAME_METRICS):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        exempt = {
            id(child)
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == _LM_EVAL_DEFAULTS for t in node.targets)
            for child in ast.walk(node.value)
        }
        for node in ast.walk(tree):
            if id(node) in docstrings or id(node) in exempt:
                continue
            named: set[str] = set()
            if isinstance(node, ast.List | ast.Tuple | ast.Set):
                named = {e.value for e in node.elts if isinstance(e, ast.Constant)} & names
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                named = {n for n in names if re.search(rf"\b{re.escape(n)}\b", node.value)}
            if len(named) >= 3:
                found.append(f"{where}:{node.lineno} {sorted(named)}")
    return found


def test_no_module_lists_metric_names_by_hand():
    assert _metric_name_lists() == []


def test_the_name_list_check_finds_a_hand_written_list(tmp_path, monkeypatch):
    package = tmp_path / "assay"
    (package / "run").mkdir(parents=True)
    (package / "run" / "judging.py").write_text(
        'JUDGES = "judge_score, judge_pairwise, judge_correct"\n'
        'GENERATIVE = {"exact_match", "bleu", "rouge"}\n',
        encoding="utf-8",
    )
    monkeypatch.setattr(f"{__name__}.ROOT", package)
    assert _metric_name_lists() == [
        "run/judging.py:1 ['judge_correct', 'judge_pairwise', 'judge_score']",
        "run/judging.py:2 ['bleu', 'exact_match', 'rouge']",
    ]
