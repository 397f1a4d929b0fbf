"""The functions the runtime guard wraps (`fork_exec`, thread starts, `atexit.register`) are
held by an audit hook of their own: no wrapper's globals or closure leads to one, a task that
asks the hook for one gets nothing, a trace function that could watch the hook is refused, and
reloading the wrapped builtin modules inside a window is refused or changes nothing."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from test_own_code_runs import write_task

from assay.tasks.registry import Registry
from assay.tasks.runtime_guard import CodeRunRefused, scoring_window, settle

WRAPPED = {"fork_exec", "start_new_thread", "start_new", "_start_new_thread", "register",
           "_register_atexit"}  # fmt: skip

# Each route puts what it found into FOUND; it must find no original.
ROUTES = {
    "a wrapper's globals, two levels deep": """
        for w in WRAPPERS:
            for v in w.__globals__.values():
                FOUND.append(v)
                if isinstance(v, dict | list | tuple | set | frozenset):
                    FOUND.extend(v.values() if isinstance(v, dict) else v)
    """,
    "a wrapper's closure cells": """
        for w in WRAPPERS:
            FOUND.extend(c.cell_contents for c in w.__closure__ or ())
    """,
    "the wrappers' getter, called by the task": """
        get = FE.__globals__['orig' + 'inal']
        for key in ('_posixsubprocess.fork_exec', '_thread.start_new_thread', 'atexit.register'):
            try:
                FOUND.append(get(key))
            except IndexError:
                pass
    """,
    "the handout event, raised by the task": """
        box = []
        sys.audit(FE.__globals__['HANDOUT'], '_posixsubprocess.fork_exec', box)
        FOUND.extend(box)
    """,
    "a function of the task's run with the wrappers' globals": """
        def ask():
            return original('_posixsubprocess.fork_exec')
        try:
            FOUND.append(types.FunctionType(ask.__code__, FE.__globals__)())
        except IndexError:
            pass
    """,
}
SETUP = """\
import _posixsubprocess, _thread, atexit, sys, threading, types
FOUND = []

def score(doc, results):
    FE = _posixsubprocess.fork_exec
    WRAPPERS = [FE, _thread.start_new_thread, _thread.start_new, atexit.register,
                threading._register_atexit]
"""


def _config(folder: Path, body: str):
    utils = SETUP + textwrap.indent(textwrap.dedent(body), "    ") + "    return {'ok': 1.0}\n"
    write_task(folder, "process_results: !function utils.score\n", utils)
    config = Registry([folder], builtins=False).get("quiet")
    assert config.process_results is not None
    return config


def _originals(found: list) -> list:
    """The found objects that are wrapped functions but not the guard's wrappers."""
    return [
        f
        for f in found
        if callable(f)
        and getattr(f, "__name__", "") in WRAPPED
        and getattr(f, "__module__", "") != "assay.tasks.runtime_guard_wrappers"
    ]


@pytest.mark.parametrize("route", list(ROUTES))
def test_no_route_from_a_wrapper_reaches_an_original(tmp_path, route):
    config = _config(tmp_path / "t", ROUTES[route])
    with scoring_window(config, confirmed=False):
        assert config.process_results({}, ["x"]) == {"ok": 1.0}
    found = config.process_results.__globals__["FOUND"]
    assert found or not route.startswith("a wrapper's globals")  # the walk saw something
    assert _originals(found) == []


def test_a_trace_function_set_by_the_task_is_refused(tmp_path):
    """A profile function would see the frames of the hook that holds the originals."""
    config = _config(
        tmp_path / "t", "sys.setprofile(lambda frame, event, arg: FOUND.append(frame))\n"
    )
    refused = r"watch the interpreter's frames \(sys.setprofile"
    with pytest.raises(CodeRunRefused, match=refused), scoring_window(config, confirmed=False):
        config.process_results({}, ["x"])
    import sys

    sys.setprofile(None)
    assert config.process_results.__globals__["FOUND"] == []


RELOADS = {
    "_posixsubprocess": (
        "FE2 = importlib.reload(_posixsubprocess).fork_exec\nRESULT.append(FE2 is FE)\nFE2(b'x')\n",
        "start a process (_posixsubprocess.fork_exec",
    ),
    "posix": (
        "importlib.reload(posix)\nRESULT.append(True)\nposix.system('true')\n",
        "start a process (os.system",
    ),
    "_thread": ("RESULT.append(importlib.reload(_thread).start_new_thread is SNT)\n", None),
    "atexit": ("RESULT.append(importlib.reload(atexit).register is REG)\n", None),
    "a fresh copy of _posixsubprocess": (
        "m = importlib.util.module_from_spec(importlib.util.find_spec('_posix' + 'subprocess'))"
        "\nRESULT.append(m.fork_exec)\n",
        "import _posixsubprocess afresh",
    ),
}


@pytest.mark.parametrize("module", list(RELOADS))
def test_reloading_a_wrapped_module_in_a_window_is_refused_or_harmless(tmp_path, module):
    """importlib.reload of a builtin module keeps the wrappers (a call after it is still
    refused); a fresh module object is an import of it, refused."""
    reload, refusal = RELOADS[module]
    body = (
        "import importlib, importlib.util, posix\nRESULT = []\n"
        "FE, SNT, REG = _posixsubprocess.fork_exec, _thread.start_new_thread, atexit.register\n"
        "try:\n" + textwrap.indent(reload, "    ") + "finally:\n    FOUND.extend(RESULT)\n"
    )
    config = _config(tmp_path / "t", body)
    if refusal is None:
        with scoring_window(config, confirmed=False):
            config.process_results({}, ["x"])
    else:
        with (
            pytest.raises(CodeRunRefused, match=re.escape(refusal)),
            scoring_window(config, confirmed=False),
        ):
            config.process_results({}, ["x"])
    found = config.process_results.__globals__["FOUND"]
    assert found == ([] if "fresh" in module else [True])  # the wrapper is still in place


def test_the_old_name_of_start_new_thread_is_followed_too(tmp_path):
    """`_thread.start_new` (an alias CPython keeps) starts a thread the guard follows: the
    os.system it runs is refused, and the run's wait for the task's threads reports it."""
    marker = tmp_path / "ran"
    body = f"import operator, os\n_thread.start_new(operator.attrgetter('sys' + 'tem')(os), ('touch {marker}',))\n"
    config = _config(tmp_path / "t", body)
    with scoring_window(config, confirmed=False):
        config.process_results({}, ["x"])
    with pytest.raises(CodeRunRefused, match=r"start a process \(os.system"):
        settle()
    assert not marker.exists()
