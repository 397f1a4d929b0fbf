"""A task that does not declare unsafe_code but whose scoring runs code is a code task.

Its Python (process_results, a metric or custom filter function, or a function of its own
files those call) could exec/eval/compile model output or start a process: the run is
refused without --confirm-run-unsafe-code (exit 2, naming the task, file, function and the
flag) and, with it, says the code runs in this process. lm-eval's own tasks that run no code
are not flagged; those that do (cruxeval, longproc's countdown) are.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from assay.cli import main
from assay.tasks.code_routes import runs_code_itself
from assay.tasks.registry import Registry

YAML = """\
task: quiet
dataset_path: json
dataset_kwargs:
  data_files:
    test: rows.jsonl
test_split: test
output_type: generate_until
doc_to_text: "{{q}}"
doc_to_target: "{{a}}"
"""

SCORING = {
    "_posixsubprocess.fork_exec": (
        "process_results: !function utils.score\n",
        "def score(doc, results):\n    import _posixsubprocess\n"
        "    return {'ok': float(_posixsubprocess is None)}\n",
        "utils.py:2 _posixsubprocess in score()",
    ),
    "exec in process_results": (
        "process_results: !function utils.score\n",
        "def score(doc, results):\n    exec(results[0], {})\n    return {'ok': 1.0}\n",
        "utils.py:2 exec in score()",
    ),
    "eval in a helper of the metric": (
        "metric_list:\n  - metric: !function utils.score\n",
        "def judge(text):\n    return eval(text)\n\n"
        "def score(references, predictions):\n    return float(judge(predictions[0]) == 1)\n",
        "utils.py:2 eval in judge()",
    ),
    "subprocess.run bound by from-import": (
        "process_results: !function utils.score\n",
        "from subprocess import run\n\n"
        "def score(doc, results):\n    run(['python3', '-c', results[0]])\n    return {'ok': 1.0}\n",
        "utils.py:4 run in score()",
    ),
    "os.system through a method of the task's class": (
        "process_results: !function utils.score\n",
        "import os\n\nclass Grader:\n    def grade(self, text):\n        return os.system(text)\n\n"
        "def score(doc, results):\n    return {'ok': float(Grader().grade(results[0]) == 0)}\n",
        "utils.py:5 os.system in Grader.grade()",
    ),
    "compile in a custom filter": (
        "filter_list:\n  - name: run\n    filter:\n      - function: custom\n"
        "        filter_fn: !function utils.keep\n",
        "def keep(resps, docs):\n    [compile(r[0], 'x', 'exec') for r in resps]\n    return resps\n",
        "utils.py:2 compile in keep()",
    ),
}


def write_task(folder: Path, yaml_extra: str, utils: str) -> None:
    folder.mkdir()
    (folder / "rows.jsonl").write_text(json.dumps({"q": "1", "a": "1"}) + "\n")
    (folder / "quiet.yaml").write_text(YAML + yaml_extra)
    (folder / "utils.py").write_text(utils)


@pytest.mark.parametrize("case", list(SCORING))
def test_a_task_whose_scoring_runs_code_is_found(tmp_path, case):
    yaml_extra, utils, expected = SCORING[case]
    write_task(tmp_path / "t", yaml_extra, utils)
    config = Registry([tmp_path / "t"], builtins=False).get("quiet")
    assert not config.unsafe_code
    runs = runs_code_itself(config)
    assert [str(r) for r in runs] == [expected]
    assert runs[0].file == str(tmp_path / "t" / "utils.py")


def test_harmless_lookalikes_are_not_flagged(tmp_path):
    utils = textwrap.dedent(
        """\
        import ast, platform, re
        from importlib.metadata import version

        PATTERN = re.compile("x")

        def score(doc, results):
            re.compile(results[0])
            platform.system()
            version("pip")
            ast.literal_eval("1")
            return {"ok": 1.0}
        """
    )
    write_task(tmp_path / "t", "process_results: !function utils.score\n", utils)
    assert runs_code_itself(Registry([tmp_path / "t"], builtins=False).get("quiet")) == []


def test_the_run_is_refused_without_the_flag_and_says_where_code_runs_with_it(tmp_path, capsys):
    yaml_extra, utils, _ = SCORING["exec in process_results"]
    folder = tmp_path / "t"
    write_task(folder, yaml_extra, utils)
    marker = tmp_path / "ran.txt"
    (folder / "rows.jsonl").write_text(json.dumps({"q": "1", "a": "1"}) + "\n")
    argv = ["run", "--model", "dummy", "--model-args",
            f"response=open({str(marker)!r}, 'w').write('ran')",
            "--tasks", "quiet", "--include-path", str(folder), "--no-cache", "--no-progress",
            "--output-dir", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "task 'quiet'" in err and str(folder / "utils.py") in err
    assert "utils.py:2 exec in score()" in err and "--confirm-run-unsafe-code" in err
    assert "Traceback" not in err and not marker.exists()

    assert main([*argv, "--confirm-run-unsafe-code"]) == 0
    err = capsys.readouterr().err
    assert "task quiet: its own Python" in err and "NOT in the sandbox" in err
    assert marker.read_text() == "ran"  # it did run in this process, as the notice said


def test_a_python_task_file_whose_scoring_runs_code_is_refused(tmp_path, capsys):
    (tmp_path / "rows.jsonl").write_text(json.dumps({"q": "1", "a": "1"}) + "\n")
    tasks = tmp_path / "my_tasks.py"
    tasks.write_text(
        textwrap.dedent(
            """\
            from assay.doc import OutputType
            from assay.catalog._common import generation_doc
            from assay.catalog._generative import computed_metrics
            from assay.tasks.config import TaskConfig


            def prompt(row, task_name):
                return generation_doc(row["q"], row["a"])


            def score(row, results):
                namespace = {}
                exec(results[0], namespace)
                return {"ok": 1.0}


            TASKS_TABLE = [
                TaskConfig(name="py_quiet", prompt_function=prompt, metrics=computed_metrics("ok"),
                           process_results=score, output_type=OutputType.GENERATE_UNTIL,
                           dataset_loader=lambda **_: {"test": [{"q": "1", "a": "1"}]},
                           evaluation_splits=("test",))
            ]
            """
        )
    )
    argv = ["run", "--model", "dummy", "--tasks", "py_quiet", "--custom-tasks", str(tasks),
            "--no-cache", "--no-progress", "--output-dir", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "py_quiet" in err and "my_tasks.py:13 exec in score()" in err
    assert str(tasks) in err and "--confirm-run-unsafe-code" in err


lm_eval = pytest.importorskip("lm_eval")
LM_EVAL_TASKS = Path(lm_eval.__file__).parent / "tasks"
QUIET_FOLDERS = ["gsm8k", "hellaswag", "mmlu", "arc", "truthfulqa", "bbh", "drop", "triviaqa",
                 "winogrande", "lambada", "squadv2", "leaderboard", "humaneval", "mbpp"]  # fmt: skip
"""lm-eval task folders whose scoring runs no code (humaneval and mbpp send theirs to
code_eval, which assay serves sandboxed)."""


def loadable(folder: str) -> list:
    """The folder's tasks that load here (some need packages this environment lacks)."""
    registry = Registry([LM_EVAL_TASKS / folder], builtins=False)
    configs = []
    for name in registry.names():
        try:
            configs.append(registry.get(name))
        except Exception:  # a tag or group, or a task needing a missing package
            continue
    return [c for c in configs if hasattr(c, "metrics")]


def test_lm_eval_tasks_that_run_no_code_are_not_flagged():
    checked = 0
    for folder in QUIET_FOLDERS:
        for config in loadable(folder):
            assert runs_code_itself(config) == [], config.name
            checked += 1
    assert checked >= 200  # mmlu and bbh alone hold 57 and 56 tasks


def test_lm_eval_tasks_that_run_code_are_flagged():
    cruxeval = {c.name: runs_code_itself(c) for c in loadable("cruxeval")}
    assert cruxeval and all(
        any(r.what == "exec" and r.function == "unsafe_execute" for r in runs)
        for runs in cruxeval.values()
    )
    countdown = [c for c in loadable("longproc") if "countdown" in c.name]
    assert countdown and all(
        [str(r) for r in runs_code_itself(c)]
        == ["metrics.py:178 eval in _evaluate_countdown_final_solution()"]
        for c in countdown
    )


DISGUISED = {
    "getattr of builtins by a computed name": (
        "import builtins\n\ndef score(doc, results):\n"
        "    getattr(builtins, 'ex' + 'ec'.strip())(results[0], {})\n    return {'ok': 1.0}\n"
    ),
    "getattr by a name built at run time": (
        "def score(doc, results):\n    name = ''.join(['ex', 'ec'])\n"
        "    getattr(__builtins__, name)(results[0], {})\n    return {'ok': 1.0}\n"
    ),
    "vars() of the builtins": (
        "def score(doc, results):\n    vars()['__builtins__']\n    return {'ok': 1.0}\n"
    ),
    "a function's globals": (
        "def score(doc, results):\n    score.__globals__['__builtins__']\n    return {'ok': 1.0}\n"
    ),
    "pickle": (
        "import pickle\n\ndef score(doc, results):\n"
        "    pickle.loads(bytes.fromhex(results[0]))\n    return {'ok': 1.0}\n"
    ),
}


TOP_LEVEL = {
    "os.system bound at the top level": (
        "import os\nRUN = os.system\n\ndef score(doc, results):\n    RUN(results[0])\n"
        "    return {'ok': 1.0}\n",
        "utils.py:2 os.system at its top level",
    ),
    "a thread made at the top level": (
        "import os, threading\nT = threading.Thread(target=os.system, args=('true',))\n\n"
        "def score(doc, results):\n    return {'ok': 1.0}\n",
        "utils.py:2 os.system at its top level",
    ),
    "a default argument": (
        "import os\n\ndef score(doc, results, _r=os.system):\n    _r(results[0])\n"
        "    return {'ok': 1.0}\n",
        "utils.py:3 os.system at its top level",
    ),
    "a class attribute": (
        "import os\n\nclass K:\n    go = os.system\n\ndef score(doc, results):\n"
        "    K.go(results[0])\n    return {'ok': 1.0}\n",
        "utils.py:4 os.system at its top level",
    ),
    "exec bound under another name": (
        "E = exec\n\ndef score(doc, results):\n    E(results[0], {})\n    return {'ok': 1.0}\n",
        "utils.py:1 exec at its top level",
    ),
    "subprocess in a comprehension of the top level": (
        "import subprocess\nR = [subprocess.Popen for _ in ()]\n\n"
        "def score(doc, results):\n    return {'ok': 1.0}\n",
        "utils.py:2 subprocess.Popen at its top level",
    ),
}


@pytest.mark.parametrize("case", list(TOP_LEVEL))
def test_the_top_level_of_the_tasks_files_is_read(tmp_path, case):
    """What a module's top level does (or binds for later) is read too: an import alone is no
    finding, what it binds is judged where it is used."""
    utils, expected = TOP_LEVEL[case]
    write_task(tmp_path / "t", "process_results: !function utils.score\n", utils)
    runs = runs_code_itself(Registry([tmp_path / "t"], builtins=False).get("quiet"))
    assert expected in [str(r) for r in runs], case


@pytest.mark.parametrize("case", list(DISGUISED))
def test_exec_under_another_spelling_is_found(tmp_path, case):
    write_task(tmp_path / "t", "process_results: !function utils.score\n", DISGUISED[case])
    assert runs_code_itself(Registry([tmp_path / "t"], builtins=False).get("quiet")), case


def test_getattr_of_a_literal_harmless_name_is_not_flagged(tmp_path):
    utils = (
        "def score(doc, results):\n    shots = getattr(doc, 'few_shot', None)\n"
        "    return {'ok': float(shots is None), 'n': len(results)}\n"
    )
    write_task(tmp_path / "t", "process_results: !function utils.score\n", utils)
    assert runs_code_itself(Registry([tmp_path / "t"], builtins=False).get("quiet")) == []
