"""Without lighteval installed, its task files and task names fail before any model loads: exit
2, a message naming the import and the extra, no traceback. lighteval is hidden from the
subprocess (None in sys.modules), so this holds whatever the venv has installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from assay.compat.lighteval import suites as lighteval_suites
from assay.errors import TaskConfigError

REPO = Path(__file__).resolve().parents[3]

HIDE_AND_RUN = """
import sys
sys.modules["lighteval"] = None  # `import lighteval...` now fails as if it were not installed
from assay.cli import main
sys.exit(main(sys.argv[1:]))
"""

TASK_FILE = """\
from lighteval.metrics.metrics import Metrics
from lighteval.tasks.lighteval_task import LightevalTaskConfig
from lighteval.tasks.requests import Doc

TASKS_TABLE = []
"""


def run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}
    # The model does not exist: had it been loaded first, its error would show instead.
    model = ["--model", "hf", "--model-args", f"pretrained={tmp_path / 'no-such-model'}"]
    command = [sys.executable, "-c", HIDE_AND_RUN, "run", *model, *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def test_a_lighteval_task_file_needs_lighteval(tmp_path):
    path = tmp_path / "my_lighteval_tasks.py"
    path.write_text(TASK_FILE, encoding="utf-8")
    done = run(["--custom-tasks", str(path), "--tasks", "mytask|0"], tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert str(path) in done.stderr
    assert "line 1: `from lighteval.metrics.metrics import Metrics`" in done.stderr
    assert "assay[lighteval-tasks] pins lighteval==0.13.0" in done.stderr
    assert "no-such-model" not in done.stderr


@pytest.mark.parametrize("task", ["lighteval|gsm8k|5", "leaderboard|mmlu:abstract_algebra|5"])
def test_a_lighteval_suite_needs_lighteval(tmp_path, task):
    done = run(["--tasks", task], tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"task string {task!r} names lighteval's task {task.split('|')[1]!r}" in done.stderr
    assert "assay[lighteval-tasks]" in done.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gsm8k", ("gsm8k", None, None, False, {})),
        ("gsm8k|5", ("gsm8k", 5, None, False, {})),
        ("lighteval|gsm8k|5", ("gsm8k", 5, "lighteval", False, {})),
        ("leaderboard|mmlu:abstract_algebra|5|0", ("mmlu:abstract_algebra", 5, "leaderboard", False, {})),
        ("lighteval|arc:easy|25|1", ("arc:easy", 25, "lighteval", True, {})),
        ("extended|ifeval", ("ifeval", None, "extended", False, {})),
        ("aime24@k=1@n=4|0", ("aime24", 0, None, False, {"k": 1, "n": 4})),
        (" custom|my:task|2 ", ("my:task", 2, "custom", False, {})),
    ],
)  # fmt: skip
def test_task_strings_parse(text, expected):
    spec = lighteval_suites.parse(text)
    assert (spec.name, spec.num_fewshot, spec.suite, spec.truncate, spec.metric_params) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gsm8k|five", "'five' must be the number of few-shot examples"),
        ("nosuite|gsm8k|5", "'nosuite' is not a lighteval suite"),
        ("lighteval|gsm8k|5|2", "'2' must be truncate (0 or 1)"),
        ("lighteval|gsm8k|5|0|1", "expected 'task', 'task|k'"),
        ("aime24@k|0", "metric parameter 'k' must be key=value"),
        ("aime24@k=one|0", "k='one' is not a Python literal"),
        ("|5", "empty task name"),
    ],
)
def test_bad_task_strings_are_refused(text, message):
    with pytest.raises(TaskConfigError, match="task string") as raised:
        lighteval_suites.parse(text)
    assert message in str(raised.value)


def test_a_file_of_task_strings(tmp_path):
    from assay.tasks.registry import _expand_task_files

    listing = tmp_path / "tasks.txt"
    listing.write_text("# my tasks\nlighteval|gsm8k|5\n\n  arc:easy|0\n", encoding="utf-8")
    assert _expand_task_files([str(listing), "boolq"]) == [
        "lighteval|gsm8k|5",
        "arc:easy|0",
        "boolq",
    ]
