"""The runtime guard's state: the tasks it watches, what each thread runs now, and the
refusal type (`runtime_guard` describes the guard)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from assay.errors import ConfigError
from assay.tasks.config import TaskConfig


class CodeRunRefused(ConfigError):
    """A task without `unsafe_code` ran code of its own (a process, exec of a string, ctypes)."""


@dataclass(eq=False)
class GuardedTask:
    """A task whose own Python the guard watches."""

    name: str
    where: str
    """The task's file and name, as errors give them."""
    folders: tuple[str, ...]
    """The folders of its own Python files (with a trailing separator)."""
    confirmed: bool
    """--confirm-run-unsafe-code: refused operations run, with a notice."""
    refusals: list[CodeRunRefused] = field(default_factory=list)
    announced: bool = False
    sandbox_promised: bool = False
    """An unsafe_code task whose programs go to code_eval (the run says "sandbox"): its Python
    running code itself is refused even with the consent flag."""


PROCESS_EVENTS = frozenset(
    {"os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty",
     "os.startfile", "subprocess.Popen", "_posixsubprocess.fork_exec",
     "cpython.PyInterpreterState_New"}
)  # fmt: skip
"""A new process, or a new interpreter in this one (whose own hooks start empty)."""
CODE_EVENTS = frozenset({"compile", "exec", "marshal.loads", "marshal.load", "code.__new__"})
GC_EVENTS = frozenset({"gc.get_referents", "gc.get_referrers", "gc.get_objects"})
"""Walks of the object graph, another way to the originals the wrappers call."""
FRAME_EVENTS = frozenset({"sys.settrace", "sys.setprofile", "sys._current_frames"})
"""A trace or profile function, or other threads' frames: ways into the frames of the guard's
own code (the hook that holds the originals) from outside them."""


@dataclass
class GuardState:
    """The process's guard: which tasks it watches and what is open now."""

    installed_at: float = 0.0
    tasks: dict[int | str, GuardedTask] = field(default_factory=dict)
    """By id() of the task's config (which `configs` keeps alive), or by the folder of a task
    file imported before its config existed (`importing_task_file`)."""
    consent: bool = False
    """--confirm-run-unsafe-code, for the task files imported before any config exists."""
    loading: tuple[str, bool] = ("", False)
    """The task whose `!function`s import now, as errors name it, and whether its YAML
    declares unsafe_code (`loading_task`)."""
    task_files: set[str] = field(default_factory=set)
    """The task files assay itself imported (`importing_task_file`): compiling them is no
    import of a file the task wrote, whenever they were written."""
    configs: list[TaskConfig] = field(default_factory=list)
    unguarded: dict[int, TaskConfig] = field(default_factory=dict)
    """Tasks decided not to be guarded, by id() (kept alive so that no id is reused)."""
    unguarded_files: set[str] = field(default_factory=set)
    """Files of tasks that declare unsafe_code: consent covers them, even in a shared folder."""
    active: dict[int, GuardedTask] = field(default_factory=dict)
    """By thread ident: the task whose Python that thread runs now (its scoring window, a thread
    it started, a callback it registered)."""
    at_exit: GuardedTask | None = None
    library_roots: tuple[str, ...] = ()
    stdlib: str = ""
    trusted: tuple[str, ...] = ()
    """assay's sandbox package: it launches programs on purpose."""
    threads: set[object] = field(default_factory=set)
    """A token per thread a guarded task started that has not ended (daemon threads aside)."""
    ended: threading.Condition = field(default_factory=threading.Condition)
    results_files: list[tuple[Path, bytes]] = field(default_factory=list)
    """The results files this process wrote as a success, with the bytes written
    (`results_written`): a file another run has rewritten since is not this run's to mark."""


STATE = GuardState()


def too_wide() -> set[str]:
    """Folders that hold assay or the installed packages: never a task's own folder."""
    return {os.path.join(root, "") for root in STATE.library_roots} | {
        os.path.join(str(p), "") for p in Path(STATE.trusted[0]).parents
    }


@contextmanager
def running(task: GuardedTask) -> Iterator[None]:
    """The calling thread runs `task`'s Python while the body runs."""
    ident = threading.get_ident()
    outer = STATE.active.get(ident)
    STATE.active[ident] = task
    try:
        yield
    finally:
        if outer is None:
            STATE.active.pop(ident, None)
        else:
            STATE.active[ident] = outer


def task_of(file: str) -> GuardedTask | None:
    state = STATE
    if file in state.unguarded_files:
        return None
    for task in state.tasks.values():
        if file.startswith(task.folders):
            return task
    return None


def task_here(caller: FrameType | None) -> GuardedTask | None:
    """The guarded task whose Python the current thread runs at `caller`, if any."""
    current = caller
    while current is not None:
        if (task := task_of(current.f_code.co_filename)) is not None:
            return task
        current = current.f_back
    state = STATE
    return state.active.get(threading.get_ident()) or state.at_exit


def frames(frame: FrameType | None) -> Iterator[FrameType]:
    while frame is not None:
        yield frame
        frame = frame.f_back
