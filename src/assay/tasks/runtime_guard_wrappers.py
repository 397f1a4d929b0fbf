"""The runtime guard's wrappers of functions that raise no audit event of their own, or that
start what must stay the task's: `_posixsubprocess.fork_exec`, thread starts, `atexit.register`
and `threading._register_atexit`; and the windows kept open for the task's threads,
finalizers and exit handlers."""

from __future__ import annotations

import sys
import threading
import weakref
from typing import Any

from assay.tasks.runtime_guard_refusals import refuse
from assay.tasks.runtime_guard_state import STATE, CodeRunRefused, GuardedTask, running, task_here

_ORIGINALS: dict[str, Any] = {}
"""The functions the guard wraps, by "module.name": the wrappers look them up here rather
than hold them in a closure or attribute a task could read (`fork_exec.__closure__`); a task
that reads this module's globals through a wrapper's `__globals__` can still reach them (see
docs/reliability.md)."""


def _wrap(module: Any, name: str, make: Any) -> None:
    """Replace `module.name` by `make(key)`, keeping the original in _ORIGINALS."""
    key = f"{module.__name__}.{name}"
    original = getattr(module, name, None)
    if original is None or key in _ORIGINALS:
        return
    _ORIGINALS[key] = original
    setattr(module, name, make(key))


def follow_threads() -> None:
    """A thread started while a guarded task's Python runs runs that task's Python too (a
    `Thread(target=os.system)` has no frame of the task's files): every way Python starts a
    thread passes its function through here first."""
    import _thread

    for module in (_thread, threading):
        for name in ("start_new_thread", "_start_new_thread", "start_joinable_thread",
                     "_start_joinable_thread"):  # fmt: skip
            _wrap(module, name, _starting_threads)


def quiet_thread_refusals() -> None:
    """A refusal ending one of the task's threads was said and recorded as it happened: the
    thread's default report would add a traceback (and format it from inside the window)."""
    original = threading.excepthook

    def excepthook(args: Any) -> None:
        if not (isinstance(args.exc_type, type) and issubclass(args.exc_type, CodeRunRefused)):
            original(args)

    threading.excepthook = excepthook


def _starting_threads(key: str) -> Any:
    def start(function: Any, *args: Any, **kwargs: Any) -> Any:
        task = task_here(sys._getframe(1))
        if task is None:
            return _ORIGINALS[key](function, *args, **kwargs)
        # A daemon Thread is not waited for (nor joined at exit); `_thread`'s bare threads are.
        owner = getattr(function, "__self__", None)
        token = None if isinstance(owner, threading.Thread) and owner.daemon else object()
        if token is not None:
            with STATE.ended:
                STATE.threads.add(token)
        try:
            return _ORIGINALS[key](in_window(function, task, token), *args, **kwargs)
        except BaseException:
            if token is not None:
                _thread_ended(token)
            raise

    return start


def check_exit_handlers() -> None:
    """An exit handler that is itself a runner (atexit.register(os.system, cmd)) is refused
    when registered, inside the window, so the run stops with exit code 2: at exit a refusal can
    only be printed. Any other handler a guarded task registers runs guarded (`guard_exit`)."""
    import atexit

    _wrap(atexit, "register", _registering)
    _wrap(threading, "_register_atexit", _registering)  # runs as threads are joined at exit


def _registering(key: str) -> Any:
    def register(function: Any, *args: Any, **kwargs: Any) -> Any:
        task = task_here(sys._getframe(1))
        if task is not None and _runs_code(function):
            refuse(task, "atexit.register", (function,), None)
        return _ORIGINALS[key](function, *args, **kwargs)

    return register


def _runs_code(function: Any) -> bool:
    """Whether `function` (or what a functools.partial wraps) is a function that runs code."""
    import functools

    from assay.tasks.code_routes import _runner

    while isinstance(function, functools.partial):
        function = function.func
    return _runner(function, getattr(function, "__name__", "")) is not None


def audit_fork_exec() -> None:
    """CPython raises no audit event in `_posixsubprocess.fork_exec`, which starts every
    subprocess and multiprocessing child (`subprocess.Popen` raises one before calling it; a
    direct call does not): the module's function is replaced by one that raises an event first."""
    try:
        import _posixsubprocess
    except ImportError:  # not a POSIX system
        return
    import subprocess

    _wrap(_posixsubprocess, "fork_exec", lambda key: _fork_exec)
    if hasattr(subprocess, "_fork_exec"):  # Python 3.12 on binds it by name
        subprocess._fork_exec = _fork_exec


def _fork_exec(*args: Any) -> Any:
    sys.audit("_posixsubprocess.fork_exec", args[0] if args else None)
    return _ORIGINALS["_posixsubprocess.fork_exec"](*args)


def in_window(func: Any, task: GuardedTask, token: object | None = None) -> Any:
    """`func`, run inside `task`'s window; `token` (a thread's) leaves `STATE.threads` when
    it returns."""

    def guarded(*args: Any, **kwargs: Any) -> Any:
        with running(task):
            try:
                return func(*args, **kwargs)
            except CodeRunRefused:
                # Already said and recorded (the run reports it, or the exit code does): the
                # thread's default report would print a traceback from inside the window.
                return None
            finally:
                if token is not None:
                    _thread_ended(token)

    return guarded


def _thread_ended(token: object) -> None:
    with STATE.ended:
        STATE.threads.discard(token)
        STATE.ended.notify_all()


def guard_finalizers(before: set[Any], task: GuardedTask) -> None:
    """weakref.finalize callbacks the task registered run inside its window when they fire."""
    registry = weakref.finalize._registry  # type: ignore[attr-defined]
    for key in set(registry) - before:
        info = registry[key]
        info.func = in_window(info.func, task)


def guard_exit(task: GuardedTask) -> None:
    """atexit runs callbacks last-registered first: one registered now runs before the task's,
    and keeps the task's window open for them."""
    import atexit

    def open_for_exit() -> None:
        STATE.at_exit = task

    atexit.register(open_for_exit)


def exit_handlers() -> int:
    import atexit

    return int(atexit._ncallbacks())
