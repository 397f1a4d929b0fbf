"""The runtime guard's wrappers of functions that raise no audit event of their own, or that
start what must stay the task's: `_posixsubprocess.fork_exec`, thread starts, `atexit.register`
and `threading._register_atexit`; and the windows kept open for the task's threads,
finalizers and exit handlers."""

from __future__ import annotations

import sys
import threading
import weakref
from types import CodeType
from typing import Any

from assay.tasks.runtime_guard_refusals import refuse
from assay.tasks.runtime_guard_state import STATE, CodeRunRefused, GuardedTask, running, task_here

HANDOUT = "assay.runtime_guard.original"
"""The audit event by which a wrapper asks for the function it wraps (`original`)."""


def original(key: str) -> Any:
    """The function the guard wrapped as `key` ("module.name"). The originals are held by an
    audit hook of their own (`runtime_guard_hook.handout`), which hands one out only to a
    wrapper's frame of this module: no wrapper holds one in a closure, attribute or global, so
    `fork_exec.__closure__` and `fork_exec.__globals__` lead to none."""
    box: list[Any] = []
    sys.audit(HANDOUT, key, box)
    return box[0]


def wrap_all(originals: dict[str, Any], codes: list[CodeType]) -> None:
    """Replace the functions the guard wraps; each original goes to `originals`, and the code
    of each wrapper (which may ask for one) to `codes`."""
    audit_fork_exec(originals, codes)
    follow_threads(originals, codes)
    check_exit_handlers(originals, codes)


def _wrap(
    module: Any, name: str, make: Any, originals: dict[str, Any], codes: list[CodeType]
) -> Any:
    """Replace `module.name` by `make(key)`, keeping the original in `originals`; the wrapper."""
    key = f"{module.__name__}.{name}"
    found = getattr(module, name, None)
    if found is None or key in originals:
        return None
    originals[key] = found
    wrapper = make(key)
    codes.append(wrapper.__code__)
    setattr(module, name, wrapper)
    return wrapper


def follow_threads(originals: dict[str, Any], codes: list[CodeType]) -> None:
    """A thread started while a guarded task's Python runs runs that task's Python too (a
    `Thread(target=os.system)` has no frame of the task's files): every way Python starts a
    thread (`_thread.start_new` too, an old name of start_new_thread) passes its function
    through here first."""
    import _thread

    for module in (_thread, threading):
        for name in ("start_new_thread", "start_new", "_start_new_thread",
                     "start_joinable_thread", "_start_joinable_thread"):  # fmt: skip
            _wrap(module, name, _starting_threads, originals, codes)


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
            return original(key)(function, *args, **kwargs)
        # A daemon Thread is not waited for (nor joined at exit); `_thread`'s bare threads are.
        owner = getattr(function, "__self__", None)
        token = None if isinstance(owner, threading.Thread) and owner.daemon else object()
        if token is not None:
            with STATE.ended:
                STATE.threads.add(token)
        try:
            return original(key)(in_window(function, task, token), *args, **kwargs)
        except BaseException:
            if token is not None:
                _thread_ended(token)
            raise

    return start


def check_exit_handlers(originals: dict[str, Any], codes: list[CodeType]) -> None:
    """An exit handler that is itself a runner (atexit.register(os.system, cmd)) is refused
    when registered, inside the window, so the run stops with exit code 2: at exit a refusal can
    only be printed. Any other handler a guarded task registers runs guarded (`guard_exit`)."""
    import atexit

    _wrap(atexit, "register", _registering, originals, codes)
    _wrap(
        threading, "_register_atexit", _registering, originals, codes
    )  # runs as threads are joined at exit


def _registering(key: str) -> Any:
    def register(function: Any, *args: Any, **kwargs: Any) -> Any:
        task = task_here(sys._getframe(1))
        if task is not None and _runs_code(function):
            refuse(task, "atexit.register", (function,), None)
        return original(key)(function, *args, **kwargs)

    return register


def _runs_code(function: Any) -> bool:
    """Whether `function` (or what a functools.partial wraps) is a function that runs code."""
    import functools

    from assay.tasks.code_routes import _runner

    while isinstance(function, functools.partial):
        function = function.func
    return _runner(function, getattr(function, "__name__", "")) is not None


def audit_fork_exec(originals: dict[str, Any], codes: list[CodeType]) -> None:
    """CPython raises no audit event in `_posixsubprocess.fork_exec`, which starts every
    subprocess and multiprocessing child (`subprocess.Popen` raises one before calling it; a
    direct call does not): the module's function is replaced by one that raises an event first."""
    try:
        import _posixsubprocess
    except ImportError:  # not a POSIX system
        return
    import subprocess

    wrapper = _wrap(_posixsubprocess, "fork_exec", lambda key: _fork_exec, originals, codes)
    if wrapper is not None and hasattr(subprocess, "_fork_exec"):  # 3.12 on binds it by name
        subprocess._fork_exec = wrapper


def _fork_exec(*args: Any) -> Any:
    sys.audit("_posixsubprocess.fork_exec", args[0] if args else None)
    return original("_posixsubprocess.fork_exec")(*args)


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
