"""The runtime guard watches a task's own Python from its first line: the import of its
`!function` files (module top level, threads and exit handlers started there) and every call
into them before scoring (process_docs, doc_to_text), under `assay run`, `--predict-only` and
`assay validate --no-data`; with --confirm-run-unsafe-code it runs after a notice."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from assay.cli import main

YAML = """\
task: early
dataset_path: json
dataset_kwargs:
  data_files:
    test: rows.jsonl
test_split: test
output_type: generate_until
doc_to_target: "{{a}}"
"""

CASES = {
    "os.system at the module's top level": (
        'doc_to_text: "{{q}}"\nprocess_docs: !function utils.keep\n',
        "import os\nos.system({cmd!r})\n\ndef keep(rows):\n    return rows\n",
    ),
    "exec of a string at the top level": (
        'doc_to_text: "{{q}}"\nprocess_docs: !function utils.keep\n',
        "exec('import os; os.system(' + repr({cmd!r}) + ')')\n\ndef keep(rows):\n    return rows\n",
    ),
    "a thread started at import": (
        'doc_to_text: "{{q}}"\nprocess_docs: !function utils.keep\n',
        "import os, threading\nt = threading.Thread(target=os.system, args=({cmd!r},))\n"
        "t.start()\nt.join()\n\ndef keep(rows):\n    return rows\n",
    ),
    "methodcaller in doc_to_text": (
        "doc_to_text: !function utils.text\n",
        "import operator, os\n\ndef text(doc):\n"
        "    operator.methodcaller('sys' + 'tem', {cmd!r})(os)\n    return doc['q']\n",
    ),
    "methodcaller in process_docs": (
        'doc_to_text: "{{q}}"\nprocess_docs: !function utils.keep\n',
        "import operator, os\n\ndef keep(rows):\n"
        "    operator.methodcaller('sys' + 'tem', {cmd!r})(os)\n    return rows\n",
    ),
}


def _task(folder: Path, case: str, marker: Path) -> None:
    extra, utils = CASES[case]
    folder.mkdir()
    (folder / "rows.jsonl").write_text(json.dumps({"q": "1", "a": "1"}) + "\n")
    (folder / "early.yaml").write_text(YAML + extra)
    (folder / "utils.py").write_text(utils.format(cmd=f"touch {marker}"))


def _run(tmp_path: Path, folder: Path, *extra: str) -> int:
    argv = ["run", "--model", "dummy", "--tasks", "early", "--include-path", str(folder),
            "--no-cache", "--no-progress", "--output-dir", str(tmp_path / "out"), *extra]  # fmt: skip
    return main(argv)


@pytest.mark.parametrize("mode", ["run", "predict-only", "validate"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_tasks_python_is_guarded_before_scoring(tmp_path, capsys, case, mode):
    marker, folder = tmp_path / "ran", tmp_path / f"t_{mode}"
    _task(folder, case, marker)
    if mode == "validate":
        argv = ["validate", "--tasks", "early", "--include-path", str(folder), "--no-data"]
        code = main(argv)
    else:
        code = _run(tmp_path, folder, *(["--predict-only"] if mode == "predict-only" else []))
    out, err = capsys.readouterr()
    if mode == "validate":
        imports = "top level" in case or "import" in case
        assert code == (1 if imports else 0)  # without data only the import runs task code
        assert ("FAIL task  early" in out and "runtime guard refused it" in out) == imports
    else:
        assert code == 2, err
        assert "runtime guard refused it" in err and f"{folder / 'early.yaml'}" in err
        assert "Traceback" not in err
    assert not marker.exists()
    assert not (tmp_path / "out" / "results.json").exists()


def test_with_the_flag_import_time_code_runs_after_a_notice(tmp_path, capsys):
    marker, folder = tmp_path / "ran", tmp_path / "t"
    _task(folder, "os.system at the module's top level", marker)
    assert _run(tmp_path, folder, "--confirm-run-unsafe-code") == 0
    err = capsys.readouterr().err
    assert marker.exists()
    assert "runtime guard saw" in err and "NOT in the sandbox" in err


@pytest.mark.parametrize("consent", [False, True])
@pytest.mark.parametrize("entry", ["evaluate", "validate --no-data", "validate"])
def test_every_entry_point_passes_the_users_consent_to_the_loading(
    tmp_path, capsys, entry, consent
):
    """`assay.evaluate(...)` and `assay validate` decide on import-time task code as `assay run`
    does: refused without --confirm-run-unsafe-code, announced and run with it."""
    from assay import evaluate
    from assay.tasks.runtime_guard import CodeRunRefused

    marker, folder = tmp_path / "ran", tmp_path / "t"
    _task(folder, "os.system at the module's top level", marker)
    if entry == "evaluate":
        settings = {"confirm_run_unsafe_code": True} if consent else {}
        if consent:
            assert evaluate("dummy", "early", include_path=folder, cache=False, **settings)
        else:
            with pytest.raises(CodeRunRefused, match="runtime guard refused it"):
                evaluate("dummy", "early", include_path=folder, cache=False, **settings)
    else:
        argv = ["validate", "--tasks", "early", "--include-path", str(folder)]
        argv += ["--no-data"] if "no-data" in entry else []
        code = main(argv + (["--confirm-run-unsafe-code"] if consent else []))
        assert code == (0 if consent else (1 if "no-data" in entry else 2))
    err = capsys.readouterr().err
    assert marker.exists() == consent
    assert ("runtime guard saw" in err and "NOT in the sandbox" in err) == consent


FORK_EXEC = (
    "    r, w = os.pipe()\n"
    "    pid = fe([b'/bin/sh', b'-c', b'touch ' + {marker!r}.encode()], [b'/bin/sh'], True, (w,),"
    " None, None, -1, -1, -1, -1, -1, -1, r, w, True, False, -1, None, None, None, -1, None,"
    " False)\n"
    "    os.waitpid(pid, 0)\n"
)
UNWRAPPING = {
    "a fresh _posixsubprocess": "    sys.modules.pop(NAME)\n"
    "    fe = FORK(pkgutil.resolve_name(NAME))\n" + FORK_EXEC,
    "fork_exec from the wrapper's closure": "    fe = FORK(sys.modules[NAME])\n"
    "    fe = [c.cell_contents for c in operator.attrgetter('__clo' + 'sure__')(fe) or ()"
    " if callable(c.cell_contents)][0]\n" + FORK_EXEC,
    "fork_exec through gc": "    fe = FORK(sys.modules[NAME])\n"
    "    fe = [o for o in gc.get_referents(fe) if getattr(o, '__name__', '') == 'fork_exec'][0]\n"
    + FORK_EXEC,
    "a fresh _thread": "    sys.modules.pop('_thread')\n    import _thread\n"
    "    _thread.start_new_thread(operator.attrgetter('sys' + 'tem')(os), ('touch ' + {marker!r},))"
    "\n    time.sleep(1)\n",
    "a fresh atexit": "    sys.modules.pop('atexit')\n    import atexit\n"
    "    atexit.register(operator.attrgetter('sys' + 'tem')(os), 'touch ' + {marker!r})\n",
}


@pytest.mark.parametrize("case", list(UNWRAPPING))
def test_the_guards_wrappers_cannot_be_undone(tmp_path, case):
    """Checked in a process of its own: the task takes modules out of sys.modules."""
    import subprocess
    import sys

    marker, folder = tmp_path / "ran", tmp_path / "t"
    folder.mkdir()
    (folder / "rows.jsonl").write_text(json.dumps({"q": "1", "a": "1"}) + "\n")
    body = UNWRAPPING[case].format(marker=str(marker))
    # The names are spelled so that the static scan, which reads them, lets the file through
    # to the runtime guard, which this test is about.
    utils = (
        "import gc, operator, os, pkgutil, sys, time\n"
        "NAME = '_posix' + 'subprocess'\nFORK = operator.attrgetter('fork' + '_exec')\n\n"
        "def score(doc, results):\n" + body
    )
    (folder / "utils.py").write_text(utils + "    return {'ok': 1.0}\n")
    yaml = YAML + 'doc_to_text: "{{q}}"\nprocess_results: !function utils.score\n'
    (folder / "early.yaml").write_text(yaml)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    argv = ["run", "--model", "dummy", "--tasks", "early", "--include-path", str(folder),
            "--no-cache", "--no-progress", "--output-dir", str(tmp_path / "out")]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "assay", *argv], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert not marker.exists() and "Traceback" not in done.stderr
    # the wrapper holds no closure: that route finds nothing to call
    said = "IndexError" if "closure" in case else "runtime guard refused it"
    assert said in done.stderr, done.stderr[-2000:]


FOREIGN = {
    "custom_dataset: os.system": "custom_dataset: !function os.system\n",
    "doc_to_text: logging.config.dictConfig": "doc_to_text: !function logging.config.dictConfig\n",
}


@pytest.mark.parametrize("case", list(FOREIGN))
@pytest.mark.parametrize("included", [False, True])
def test_a_function_outside_the_tasks_files_is_refused(tmp_path, capsys, case, included):
    """A `!function` naming a standard-library or installed module (directly, or in a YAML
    included from outside the named folder) is refused before anything runs: exit 2, one
    message naming the file, the value and the fix."""
    folder, outside = tmp_path / "t", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    (folder / "rows.jsonl").write_text(json.dumps({"q": "1", "a": "1"}) + "\n")
    text = YAML.replace("rows.jsonl", str(folder / "rows.jsonl")) + FOREIGN[case]
    if "doc_to_text" not in case:
        text += 'doc_to_text: "{{q}}"\n'
    if included:
        (outside / "base.yaml").write_text(text.replace("task: early\n", ""))
        (folder / "early.yaml").write_text(f"task: early\ninclude: {outside / 'base.yaml'}\n")
    else:
        (folder / "early.yaml").write_text(text)
    assert _run(tmp_path, folder) == 2
    err = capsys.readouterr().err
    dotted = FOREIGN[case].split("!function ")[1].strip()
    assert f"'!function {dotted}'" in err and "beside its YAML" in err
    assert "unsafe_code: true" in err and "Traceback" not in err and err.count("error:") == 1


LATE = {
    "threading._register_atexit of a runner": "    operator.methodcaller('_register' + '_atexit',"
    " functools.partial(operator.attrgetter('sys' + 'tem')(os), 'touch ' + {marker!r}))"
    "(threading)\n",
    "a timer firing after the run": "    s = sched.scheduler(time.monotonic, time.sleep)\n"
    "    s.enter(2, 1, operator.attrgetter('sys' + 'tem')(os), ('touch ' + {marker!r},))\n"
    "    threading.Thread(target=s.run).start()\n",
    "a timer firing after the wait": "    s = sched.scheduler(time.monotonic, time.sleep)\n"
    "    s.enter(7, 1, operator.attrgetter('sys' + 'tem')(os), ('touch ' + {marker!r},))\n"
    "    threading.Thread(target=s.run).start()\n",
    "a bare _thread timer": "    s = sched.scheduler(time.monotonic, time.sleep)\n"
    "    s.enter(1, 1, operator.attrgetter('sys' + 'tem')(os), ('touch ' + {marker!r},))\n"
    "    _thread.start_new_thread(s.run, ())\n",
    "a finalizer run at exit": "    KEEP.append(K())\n"
    "    weakref.finalize(KEEP[-1], operator.attrgetter('sys' + 'tem')(os), 'touch ' + {marker!r})\n",
}


@pytest.mark.parametrize("case", list(LATE))
def test_a_refusal_after_the_runs_checks_still_fails_the_run(tmp_path, case):
    """In a process of its own: the refusal comes after the task scored (a thread the run waits
    for) or as the process ends (then results.json, written already, is rewritten as failed)."""
    import subprocess
    import sys

    marker, folder = tmp_path / "ran", tmp_path / "t"
    folder.mkdir()
    (folder / "rows.jsonl").write_text(json.dumps({"q": "1", "a": "1"}) + "\n")
    body = LATE[case].format(marker=str(marker))
    utils = (
        "import _thread, functools, operator, os, sched, threading, time, weakref\n\n"
        "class K:\n    pass\n\nKEEP = []\n\ndef score(doc, results):\n"
    )
    (folder / "utils.py").write_text(utils + body + "    return {'ok': 1.0}\n")
    yaml = YAML + 'doc_to_text: "{{q}}"\nprocess_results: !function utils.score\n'
    (folder / "early.yaml").write_text(yaml)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    argv = ["run", "--model", "dummy", "--tasks", "early", "--include-path", str(folder),
            "--no-cache", "--no-progress", "--output-dir", str(tmp_path / "out")]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "assay", *argv], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert not marker.exists()
    assert "Traceback" not in done.stderr and "compile Python source" not in done.stderr
    assert "start a process" in done.stderr or "register an exit handler" in done.stderr
    results = tmp_path / "out" / "results.json"
    if results.exists():  # a stopped run's file: it says so, with the refusal
        recorded = json.loads(results.read_text())["assay"]
        assert recorded["stopped_by"] == "error"
        assert "runtime guard refused it" in recorded["refused"]
    errors = [line for line in done.stderr.splitlines() if line.startswith("assay: error:")]
    assert len(errors) == 1 and "t/early.yaml" in errors[0], done.stderr[-2000:]


def test_a_late_refusal_marks_only_the_results_file_this_run_wrote(tmp_path):
    """The exit-time rewrite leaves a results.json that another run wrote since alone."""
    from assay.tasks.runtime_guard_refusals import mark_failed
    from assay.tasks.runtime_guard_state import CodeRunRefused

    path = tmp_path / "results.json"
    path.write_text(json.dumps({"results": {}, "assay": {}}))
    ours = path.read_bytes()
    refusal = CodeRunRefused("task 't': the runtime guard refused it")
    assert mark_failed(path, ours, refusal)
    recorded = json.loads(path.read_text())["assay"]
    assert recorded == {"stopped_by": "error", "refused": str(refusal)}
    path.write_text(json.dumps({"results": {"other": {}}, "assay": {}}))
    theirs = path.read_bytes()
    assert not mark_failed(path, ours, refusal) and path.read_bytes() == theirs


def test_a_metric_script_from_the_current_directory_is_announced(tmp_path, capsys, monkeypatch):
    """evaluate.load('name') imports ./name/name.py when the directory assay starts in has
    one (as under lm-eval): the run says so before it runs, naming the file."""
    pytest.importorskip("evaluate")
    from assay.metrics.hf_evaluate import load_evaluate_metric

    script = tmp_path / "localmetric" / "localmetric.py"
    script.parent.mkdir()
    script.write_text(
        "import datasets\nimport evaluate\n\n\nclass Localmetric(evaluate.Metric):\n"
        "    def _info(self):\n"
        "        return evaluate.MetricInfo(description='', citation='', inputs_description='',"
        " features=datasets.Features({'predictions': datasets.Value('string'),"
        " 'references': datasets.Value('string')}))\n\n"
        "    def _compute(self, predictions, references):\n"
        "        return {'localmetric': float(predictions == references)}\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    compute = load_evaluate_metric("localmetric")
    assert compute(predictions=["a"], references=["a"]) == {"localmetric": 1.0}
    err = capsys.readouterr().err
    assert f"imports {script}" in err and "runs in this process as it imports" in err


def test_a_refusal_hides_the_runs_secrets(tmp_path):
    """A refused command that holds a secret of the run (a key given in the model's arguments)
    is shown with the secret hidden."""
    from assay.tasks.registry import Registry
    from assay.tasks.runtime_guard import CodeRunRefused, scoring_window
    from assay.util.redact import remember

    secret = "sk-guard-secret-0123456789"
    remember(secret)
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "rows.jsonl").write_text(json.dumps({"q": "1", "a": "1"}) + "\n")
    (folder / "utils.py").write_text(
        "import operator, os\n\ndef score(doc, results):\n"
        f"    operator.attrgetter('sys' + 'tem')(os)('echo {secret}')\n    return {{'ok': 1.0}}\n"
    )
    (folder / "early.yaml").write_text(
        YAML.replace("rows.jsonl", str(folder / "rows.jsonl"))
        + 'doc_to_text: "{{q}}"\nprocess_results: !function utils.score\n'
    )
    config = Registry([folder], builtins=False).get("early")
    assert config.process_results is not None
    with pytest.raises(CodeRunRefused) as refused, scoring_window(config, confirmed=False):
        config.process_results({}, ["x"])
    assert "start a process (os.system" in str(refused.value)
    assert secret not in str(refused.value)
