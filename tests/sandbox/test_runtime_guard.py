"""The runtime guard: a task without unsafe_code whose Python runs code is refused as it runs.

Each spelling below gets past the static scan (`runs_code_itself` finds nothing: the top level
of the task's file names no runner either) and would run
a shell command from a task's process_results; the audit hook refuses it: exit 2, naming the
task, the file and line, the operation and the fix, and the command never runs. With
--confirm-run-unsafe-code it runs, after a notice. Honest task code (dataclasses, namedtuple,
enum, typing, re, json, math, ast) keeps running with the same results.
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_own_code_runs import write_task

from assay.cli import main
from assay.tasks.code_routes import runs_code_itself
from assay.tasks.registry import Registry
from assay.tasks.runtime_guard import CodeRunRefused, raise_pending, scoring_window

# Each body runs `CMD` (a shell command touching the marker) its own way; {cmd} is filled in.
SPELLINGS = {
    "operator.methodcaller": (
        "import os, operator",
        "operator.methodcaller('sys' + 'tem', {cmd!r})(os)",
    ),
    "operator.attrgetter": (
        "import os, operator",
        "operator.attrgetter('sys' + 'tem')(os)({cmd!r})",
    ),
    "sys.modules builtins exec": (
        "import sys",
        "sys.modules['buil' + 'tins'].exec(\"__import__('os').system(\" + repr({cmd!r}) + ')')",
    ),
    "timeit.timeit of a string": (
        "import timeit",
        "timeit.timeit(\"__import__('os').system(\" + repr({cmd!r}) + ')', number=1)",
    ),
    "cProfile.run": (
        "import cProfile",
        "cProfile.run(\"__import__('os').system(\" + repr({cmd!r}) + ')')",
    ),
    "pkgutil.resolve_name": ("import pkgutil", "pkgutil.resolve_name('os:sys' + 'tem')({cmd!r})"),
    "os.spawnlp": ("import os", "os.spawnlp(os.P_WAIT, 'sh', 'sh', '-c', {cmd!r})"),
    "os.spawnvp": ("import os", "os.spawnvp(os.P_WAIT, 'sh', ['sh', '-c', {cmd!r}])"),
    "a default argument": (
        "import os, operator\n\ndef _run(c, _r=operator.attrgetter('sys' + 'tem')(os)):\n    _r(c)",
        "_run({cmd!r})",
    ),
    "functools.partial global": (
        "import os, functools, operator\nRUN = functools.partial(operator.attrgetter('sys' + 'tem')(os))",
        "RUN({cmd!r})",
    ),
    "a class attribute": (
        "import os, operator\n\nclass K:\n    go = operator.attrgetter('sys' + 'tem')(os)",
        "K.go({cmd!r})",
    ),
    "a module dict": (
        "import os, functools, operator\n"
        "R = {{'x': functools.partial(operator.attrgetter('sys' + 'tem')(os))}}",
        "R['x']({cmd!r})",
    ),
    "asyncio subprocess": (
        "import asyncio\n\nasync def _m(c):\n"
        "    p = await asyncio.create_subprocess_shell(c)\n    await p.wait()",
        "asyncio.run(_m({cmd!r}))",
    ),
    "doctest": (
        "import doctest",
        "doctest.DocTestRunner().run(doctest.DocTestParser().get_doctest("
        "\">>> __import__('os').system(\" + repr({cmd!r}) + ')\\n', {{}}, 'x', None, 0))",
    ),
    "logging.config factory": (
        "import logging.config",
        "logging.config.dictConfig({{'version': 1, 'handlers': {{'h': {{"
        "'()': 'ext://os.sys' + 'tem', 'command': {cmd!r}}}}}}})",
    ),
    "functools.wraps over a lambda": (
        "import os, functools, operator\n"
        "_c = functools.partial(operator.attrgetter('sys' + 'tem')(os), {cmd!r})\n\n"
        "def _score(doc, results):\n    return None",
        "functools.wraps(_score)(lambda d, r, _c=_c: _c())(doc, results)",
    ),
}


def _utils(spelling: str, marker: Path, swallow: bool = False) -> str:
    setup, call = SPELLINGS[spelling]
    setup, body = (part.format(cmd=f"touch {marker}") for part in (setup, call))
    if swallow:  # the task's code catches the refusal: the run must still stop
        body = f"try:\n        {body}\n    except BaseException:\n        pass"
    return f"{setup}\n\ndef score(doc, results):\n    {body}\n    return {{'ok': 1.0}}\n"


def _run(tmp_path: Path, folder: Path, *extra: str) -> int:
    argv = ["run", "--model", "dummy", "--tasks", "quiet", "--include-path", str(folder),
            "--no-cache", "--no-progress", "--output-dir", str(tmp_path / "out"), *extra]  # fmt: skip
    return main(argv)


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_each_spelling_passes_the_scan_and_is_refused_as_it_runs(
    tmp_path, capsys, monkeypatch, spelling
):
    marker, folder = tmp_path / "ran", tmp_path / "t"
    if spelling == "logging.config factory":
        # dictConfig closes every handler the process had (pytest's capture handlers too)
        # before it builds the refused one: keep them open for the tests after this one.
        monkeypatch.setattr(logging, "shutdown", lambda handlerList=None: None)
        monkeypatch.setattr(logging, "_handlerList", list(logging._handlerList))  # type: ignore[attr-defined]
    write_task(folder, "process_results: !function utils.score\n", _utils(spelling, marker))
    config = Registry([folder], builtins=False).get("quiet")
    assert runs_code_itself(config) == []  # the static scan cannot read it
    assert _run(tmp_path, folder) == 2
    err = capsys.readouterr().err
    assert not marker.exists()
    assert "task 'quiet'" in err and f"at {folder / 'utils.py'}:" in err
    assert "runtime guard refused it" in err and "--confirm-run-unsafe-code" in err
    assert "unsafe_code: true" in err and "Traceback" not in err
    assert not (tmp_path / "out" / "results.json").exists()


def test_a_refusal_the_task_catches_still_stops_the_run(tmp_path, capsys):
    marker, folder = tmp_path / "ran", tmp_path / "t"
    utils = _utils("operator.methodcaller", marker, swallow=True)
    write_task(folder, "process_results: !function utils.score\n", utils)
    assert _run(tmp_path, folder) == 2
    assert "start a process (os.system" in capsys.readouterr().err
    assert not marker.exists()


def test_with_the_flag_the_code_runs_after_a_notice(tmp_path, capsys):
    marker, folder = tmp_path / "ran", tmp_path / "t"
    write_task(folder, "process_results: !function utils.score\n", _utils("os.spawnvp", marker))
    assert _run(tmp_path, folder, "--confirm-run-unsafe-code") == 0
    err = capsys.readouterr().err
    assert marker.exists()
    assert err.count("runtime guard saw") == 1 and "task 'quiet'" in err
    assert "runs in this process, NOT in the sandbox" in err and "refused" not in err


HONEST = textwrap.dedent(
    """\
    import ast, enum, json, math, re
    from collections import namedtuple
    from dataclasses import dataclass, field
    from typing import NamedTuple, Optional

    class Verdict(enum.Enum):
        RIGHT = 1
        WRONG = 0

    def score(doc, results):
        Pair = namedtuple("Pair", "gold pred")
        Row = NamedTuple("Row", [("text", str), ("n", Optional[int])])

        @dataclass(frozen=True)
        class Scored:
            pair: Pair
            tags: list = field(default_factory=list)

        pair = Pair(doc["a"], results[0].strip())
        same = re.sub(r"\\s+", "", pair.pred) == pair.gold
        kept = json.loads(json.dumps({"n": ast.literal_eval("[1, 2]")}))
        verdict = Verdict.RIGHT if same else Verdict.WRONG
        Scored(pair, [Row(pair.pred, len(kept["n"]))])
        return {"ok": float(verdict.value), "log": math.log(2 + len(pair.pred))}
    """
)


def test_honest_task_code_runs_unchanged(tmp_path):
    folder = tmp_path / "t"
    write_task(folder, "process_results: !function utils.score\n", HONEST)
    (folder / "rows.jsonl").write_text(json.dumps({"q": "1", "a": "lol"}) + "\n")
    assert _run(tmp_path, folder) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())["results"]["quiet"]
    assert results["ok,none"] == 1.0 and results["log,none"] == pytest.approx(math.log(5))


def test_a_thread_the_task_started_is_watched_after_its_window(tmp_path, capsys):
    """A worker thread the task starts runs os.system (a builtin: no frame of the task's files
    on its stack) once the task's aggregation lets it, after the scoring window closed."""
    marker, folder = tmp_path / "ran", tmp_path / "t"
    utils = textwrap.dedent(
        f"""\
        import operator, os, threading
        from concurrent.futures import ThreadPoolExecutor

        RUN = {{"it": operator.attrgetter("sys" + "tem")(os)}}  # out of the static scan's sight
        gate = threading.Event()
        pool = None

        def score(doc, results):
            global pool
            if pool is None:
                pool = ThreadPoolExecutor(1)
                pool.submit(gate.wait, 30)
                pool.submit(RUN['it'], {f"touch {marker}"!r})
            return {{"ok": 1.0}}

        def agg(values):
            gate.set()
            pool.shutdown(wait=True)
            return sum(values) / len(values)
        """
    )
    extra = "metric_list:\n  - metric: ok\n    aggregation: !function utils.agg\n"
    write_task(folder, "process_results: !function utils.score\n" + extra, utils)
    assert _run(tmp_path, folder) == 2
    err = capsys.readouterr().err
    assert not marker.exists()
    assert "start a process (os.system" in err and "no frame of its files" in err


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_finalizer_the_task_registered_runs_guarded(tmp_path):
    """A weakref.finalize callback registered in the window fires later, from frames that are
    not the task's (here the test's): it is refused, and the refusal is reported."""
    marker, folder = tmp_path / "ran", tmp_path / "t"
    utils = textwrap.dedent(
        f"""\
        import operator, os, weakref

        RUN = {{"it": operator.attrgetter("sys" + "tem")(os)}}
        kept = []

        class Box:
            pass

        def score(doc, results):
            box = Box()
            weakref.finalize(box, RUN["it"], {f"touch {marker}"!r})
            kept.append(box)
            return {{"ok": 1.0}}
        """
    )
    write_task(folder, "process_results: !function utils.score\n", utils)
    config = Registry([folder], builtins=False).get("quiet")
    with scoring_window(config, confirmed=False):
        assert config.process_results is not None
        config.process_results({}, ["x"])
    config.process_results.__globals__["kept"].clear()  # the finalizer fires here
    with pytest.raises(CodeRunRefused, match=r"start a process \(os.system"):
        raise_pending()
    assert not marker.exists()


EXIT_HANDLERS = {
    # atexit.register of a runner is refused as it registers: the run stops with exit code 2.
    "atexit.register(os.system)": ("import atexit", "atexit.register(RUN['it'], {cmd!r})", 2),
    # bound by name as the task's file imports: the guard starts before that import, so the
    # name is the guarded register, refused too.
    "an early-bound register": ("from atexit import register", "register(RUN['it'], {cmd!r})", 2),
}


@pytest.mark.parametrize("case", list(EXIT_HANDLERS))
def test_an_exit_handler_the_task_registered_runs_guarded(tmp_path, case):
    """atexit callbacks run as the process ends: checked in a process of its own."""
    marker, folder = tmp_path / "ran", tmp_path / "t"
    setup, call, code = EXIT_HANDLERS[case]
    utils = (
        f"import os, operator\n{setup}\n\nRUN = {{'it': operator.attrgetter('sys' + 'tem')(os)}}\n\n"
        f"def score(doc, results):\n    {call.format(cmd=f'touch {marker}')}\n"
        "    return {'ok': 1.0}\n"
    )
    write_task(folder, "process_results: !function utils.score\n", utils)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    argv = ["run", "--model", "dummy", "--tasks", "quiet", "--include-path", str(folder),
            "--no-cache", "--no-progress", "--output-dir", str(tmp_path / "out")]  # fmt: skip
    command = [sys.executable, "-m", "assay", *argv]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert not marker.exists()
    assert done.returncode == code, done.stderr[-2000:]
    said = "register an exit handler that runs code" if code else "start a process (os.system"
    assert said in done.stderr, done.stderr[-2000:]


def test_the_window_guards_only_the_task_and_what_it_starts(tmp_path):
    """While a guarded task scores, assay's other threads (started before, by assay) still
    start processes; and assay's sandbox, called from the task's own code, runs its program."""
    import threading

    folder = tmp_path / "t"
    utils = textwrap.dedent(
        """\
        from assay.sandbox import Limits, SandboxPolicy, run_many

        def score(doc, results):
            [outcome] = run_many(["print('hi')"], Limits(timeout_s=30.0), SandboxPolicy("none"))
            return {"ok": float(outcome.stdout.strip() == "hi")}
        """
    )
    write_task(folder, "process_results: !function utils.score\n", utils)
    config = Registry([folder], builtins=False).get("quiet")
    assert config.process_results is not None
    go, done, seen = threading.Event(), threading.Event(), []

    def assay_worker() -> None:
        go.wait(30)
        seen.append(subprocess.run(["true"], check=False).returncode)
        done.set()

    worker = threading.Thread(target=assay_worker)
    worker.start()
    with scoring_window(config, confirmed=False):
        go.set()
        assert done.wait(30)
        assert config.process_results({}, ["x"]) == {"ok": 1.0}
    worker.join(30)
    assert seen == [0]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_thread_started_after_the_window_from_the_tasks_code_is_watched(tmp_path, capsys):
    """A threading.Timer built in process_results and started by the task's aggregation runs
    os.system in a thread whose stack holds no frame of the task's files."""
    marker, folder = tmp_path / "ran", tmp_path / "t"
    utils = textwrap.dedent(
        f"""\
        import operator, os, threading

        RUN = {{"it": operator.attrgetter("sys" + "tem")(os)}}
        timers = []

        def score(doc, results):
            timers.append(threading.Timer(0.0, RUN["it"], [{f"touch {marker}"!r}]))
            return {{"ok": 1.0}}

        def agg(values):
            timers[0].start()
            timers[0].join()
            return sum(values) / len(values)
        """
    )
    extra = "metric_list:\n  - metric: ok\n    aggregation: !function utils.agg\n"
    write_task(folder, "process_results: !function utils.score\n" + extra, utils)
    assert _run(tmp_path, folder) == 2
    assert not marker.exists()
    assert "start a process (os.system" in capsys.readouterr().err
