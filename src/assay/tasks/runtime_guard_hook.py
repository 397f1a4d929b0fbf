"""The runtime guard's audit hook (PEP 578): which events it refuses, and when they are the
guarded task's (`runtime_guard` describes the rules)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from assay.tasks import runtime_guard_wrappers
from assay.tasks.runtime_guard_refusals import refuse
from assay.tasks.runtime_guard_state import (
    CODE_EVENTS,
    FRAME_EVENTS,
    GC_EVENTS,
    PROCESS_EVENTS,
    STATE,
    GuardedTask,
    frames,
    task_here,
    task_of,
)
from assay.tasks.runtime_guard_wrappers import HANDOUT, quiet_thread_refusals, wrap_all

_WATCHED = PROCESS_EVENTS | CODE_EVENTS

_IMPORT_FILES = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")
_CLASS_BUILDERS = frozenset({"dataclasses", "collections", "typing", "enum", "ast"})
"""Standard-library modules that compile source they write themselves, from names they check
(identifiers), or only parse it (ast)."""


_WRAPPED_MODULES = frozenset({"_posixsubprocess", "_thread", "threading", "atexit"})
"""Modules whose functions the guard wraps: importing one afresh (after taking it out of
sys.modules) would give the unwrapped functions back, so a guarded task may not."""


def install() -> None:
    state = STATE
    if state.installed_at:
        return
    import site
    import sysconfig

    import assay.sandbox

    paths = sysconfig.get_paths()
    roots = {paths["purelib"], paths["platlib"], *site.getsitepackages()}
    if site.ENABLE_USER_SITE and site.getusersitepackages():
        roots.add(site.getusersitepackages())
    assay_root = str(Path(assay.sandbox.__file__).parent.parent)
    state.library_roots = tuple(sorted(os.path.join(r, "") for r in {*roots, assay_root}))
    state.stdlib = os.path.join(paths["stdlib"], "")
    state.trusted = (os.path.join(str(Path(assay.sandbox.__file__).parent), ""),)
    state.installed_at = time.time()
    # The originals live in the handout hook's closure alone (nothing in Python can list the
    # audit hooks): it is added first, so no wrapper ever asks before it can answer.
    originals: dict[str, Any] = {}
    codes: list[CodeType] = []
    sys.addaudithook(handout(originals, codes))
    sys.addaudithook(_hook)
    wrap_all(originals, codes)
    quiet_thread_refusals()


def handout(originals: dict[str, Any], codes: list[CodeType]) -> Callable[..., None]:
    """The audit hook that hands a wrapper (a frame running one of `codes`, with the wrappers'
    module as its globals, through `runtime_guard_wrappers.original`) the function it wraps;
    anyone else asking gets nothing. A hook of its own, so that the frames of the guard's main
    hook (which formats the task's objects in its messages) hold no original."""
    asker = runtime_guard_wrappers.original.__code__
    namespace = vars(runtime_guard_wrappers)

    def hand_out(event: str, args: tuple[Any, ...]) -> None:
        if event != HANDOUT:
            return
        asking = sys._getframe(1)
        wrapper = asking.f_back
        if (
            asking.f_code is asker
            and asking.f_globals is namespace
            and wrapper is not None
            and wrapper.f_globals is namespace
            and any(wrapper.f_code is code for code in codes)
            and len(args) == 2
            and type(args[0]) is str
            and type(args[1]) is list
        ):
            args[1].append(originals[args[0]])

    return hand_out


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event == "import":
        if args and args[0] in _WRAPPED_MODULES:
            _refuse_reimport(event, args)
        return
    if event in GC_EVENTS:
        _refuse_reimport(event, args)
        return
    if event in FRAME_EVENTS:
        _refuse_reimport(event, args, own_frame_only=True)
        return
    if event not in _WATCHED and not event.startswith("ctypes."):
        return
    try:
        caller: FrameType | None = sys._getframe(1)
    except ValueError:  # called from C with no Python frame (an atexit builtin, a finalizer)
        caller = None
    found = _judge(event, args, caller)
    if found is None:
        return
    refuse(found[0], event, args, found[1])


def _refuse_reimport(event: str, args: tuple[Any, ...], own_frame_only: bool = False) -> None:
    """A guarded task importing a wrapped module afresh, walking the object graph, or setting a
    trace function is refused: each leads back to the functions the guard wraps. With
    `own_frame_only`, only when a frame of the task's files asks (a tracer that a coverage tool
    set for every thread still starts in the task's threads)."""
    caller = sys._getframe(2)
    for frame in frames(caller):
        if frame.f_code.co_filename.startswith(STATE.trusted):
            return
    task = task_here(caller)
    if task is not None:
        own = next((f for f in frames(caller) if task_of(f.f_code.co_filename)), None)
        if own is not None or not own_frame_only:
            refuse(task, event, args, own)


def _judge(
    event: str, args: tuple[Any, ...], caller: FrameType | None
) -> tuple[GuardedTask, FrameType | None] | None:
    """The guarded task whose Python asks for `event`, and its innermost frame; None when the
    event is allowed."""
    state = STATE
    task, frame, importing = None, None, False
    current: FrameType | None = caller
    while current is not None:
        file = current.f_code.co_filename
        if file.startswith(state.trusted):
            return None  # assay's sandbox starting a program (and making itself non-dumpable)
        if file in _IMPORT_FILES:
            importing = True
        elif (task := task_of(file)) is not None:
            frame = current
            break
        current = current.f_back
    if task is None:
        task = state.active.get(threading.get_ident()) or state.at_exit
        if task is None:
            return None
    if event in PROCESS_EVENTS:
        return task, frame
    if event.startswith("ctypes."):
        return None if importing else (task, frame)
    return None if caller and _allowed_code(event, args, caller) else (task, frame)


def _allowed_code(event: str, args: tuple[Any, ...], caller: FrameType) -> bool:
    """Whether compiling or running code here is an import, a class builder's, or an installed
    library's own (see the module's docstring)."""
    state = STATE
    file = caller.f_code.co_filename
    if file in _IMPORT_FILES:
        if event != "compile":
            return True
        path = args[1] if len(args) > 1 else None
        return path in state.task_files or _written_before(path, state.installed_at)
    if task_of(file) is not None:
        return False
    if file.startswith(state.library_roots):
        return True
    module = caller.f_globals.get("__name__", "")
    return file.startswith(state.stdlib) and module in _CLASS_BUILDERS


def _written_before(path: Any, moment: float) -> bool:
    """Whether `path` names a file last written before `moment` (an installed module, not one
    the task's code wrote since)."""
    try:
        return os.stat(os.fsdecode(path)).st_mtime < moment
    except (OSError, TypeError, ValueError):
        return False
