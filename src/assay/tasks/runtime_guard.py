"""The runtime guard: a task that does not declare `unsafe_code` runs no code of its own.

`code_routes.runs_code_itself` reads a task's scoring Python before any doc loads; a spelling
it cannot read (`operator.methodcaller("system", ...)`, `timeit.timeit(source)`,
`pkgutil.resolve_name("os:system")`, a default argument holding `os.system` ...) still reaches
one of a few operations that CPython reports to audit hooks (PEP 578). This guard is the second
line: an audit hook, installed once per process the first time a task without `unsafe_code`
scores with Python of its own, that refuses while that task's Python runs

- a new process: os.system, os.exec*, os.spawn*, os.fork, os.posix_spawn, subprocess (and so
  asyncio's subprocesses, pty.spawn, multiprocessing);
- Python compiled or run from data: compile/exec/eval of a string, marshal, a code object
  built by hand (types.CodeType), wherever the call comes from: the task's own file, or the
  standard library's runners of source text (timeit, doctest, cProfile, pdb, code, runpy ...);
  an import of a module file written since the guard started;
- ctypes (foreign calls), except while a library imports.

"While that task's Python runs" means: inside a scoring window (the pipeline opens one around
a guarded task's filters and scoring, in the thread that scores), in a frame of a file in the
task's own folders (its generators, callbacks and methods, whenever they run), in a thread
started from any of these (every thread start passes through the guard), and in exit-time and
finalizer callbacks registered during a window; an exit handler that is itself a runner
(`atexit.register(os.system, cmd)`) is refused as it registers. A refused operation raises
`CodeRunRefused` where it was called and is recorded: the window's end (and the end of the task)
raises it even if the task's code caught it, so the run stops with exit code 2 and a message
naming the task, file, line, and operation. With --confirm-run-unsafe-code the operation
runs, and the run says so first.

Allowed on purpose: the standard library's class builders that exec source they write
themselves (dataclasses, collections.namedtuple, typing, enum, ast.parse/literal_eval), imports
of installed modules, and libraries that evaluate strings inside themselves (sympy's
sympify: the guard does not judge what an installed library does with its arguments), and
assay's own sandbox (`assay.sandbox`) running a program. CPython raises no event when
`_posixsubprocess.fork_exec` is called directly; the guard wraps it to raise one.
docs/reliability.md gives the threat model.

This module is the guard's interface to the run; its parts: `runtime_guard_state` (the tasks
watched, what each thread runs now), `runtime_guard_hook` (the audit hook and its rules),
`runtime_guard_wrappers` (the functions it wraps, and the windows kept open for the task's
threads and callbacks), `runtime_guard_refusals` (raising, recording and wording a refusal).
"""

from __future__ import annotations

import contextlib
import os
import sys
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import MethodType
from typing import Any

from assay.tasks.config import MetricSpec, TaskConfig
from assay.tasks.runtime_guard_hook import install
from assay.tasks.runtime_guard_refusals import first, mark_failed
from assay.tasks.runtime_guard_state import (
    STATE,
    CodeRunRefused,
    GuardedTask,
    running,
    too_wide,
)
from assay.tasks.runtime_guard_wrappers import exit_handlers, guard_exit, guard_finalizers

__all__ = [
    "CodeRunRefused",
    "GuardedTask",
    "exit_nonzero_after_late_refusals",
    "foreign_functions_allowed",
    "guarded_task",
    "importing_task_file",
    "loading_task",
    "own_files",
    "raise_pending",
    "results_written",
    "scoring_window",
    "settle",
    "start_run",
    "trust_files",
]


def guarded_task(config: TaskConfig, confirmed: bool) -> GuardedTask | None:
    """The guard's record of `config`, made (and the hook installed) the first time: None for a
    task that declares unsafe_code (unless its programs go to code_eval, which the run promises
    runs in the sandbox) or has no Python of its own that sees model output."""
    state = STATE
    if (known := state.tasks.get(id(config))) is not None or id(config) in state.unguarded:
        return known
    files = own_files(config)
    promised = config.unsafe_code and _sandbox_promised(config)
    if (config.unsafe_code and not promised) or (not files and not _evaluate_metrics(config)):
        if config.unsafe_code:
            state.unguarded_files.update(files)
        state.unguarded[id(config)] = config
        return None
    install()
    state.unguarded_files.difference_update(files)
    confirmed = confirmed and not promised
    folders = tuple(sorted({str(Path(f).parent) + os.sep for f in files} - too_wide()))
    imported = [state.tasks[f] for f in folders if f in state.tasks]
    if imported:  # one record per folder: its import and its scoring record refusals together
        task = imported[0]
        task.name, task.where, task.confirmed = config.name, config.where(), confirmed
        task.folders = tuple(sorted({*task.folders, *folders}))
    else:
        task = GuardedTask(config.name, config.where(), folders, confirmed)
    task.sandbox_promised = promised
    state.tasks[id(config)] = task
    state.configs.append(config)
    return task


def start_run(confirmed: bool) -> None:
    """A run starts: record its --confirm-run-unsafe-code before any task file is imported
    (the task files an earlier run in this process imported follow it too), and forget the
    refusals an earlier run reported."""
    STATE.consent = confirmed
    for key, task in STATE.tasks.items():
        task.refusals.clear()
        if isinstance(key, str):
            task.confirmed = confirmed


@contextmanager
def loading_task(where: str, unsafe: bool) -> Iterator[None]:
    """While the body builds the task `where` from its YAML: whether that YAML declares
    unsafe_code (its files' imports are then not guarded)."""
    outer, STATE.loading = STATE.loading, (where, unsafe)
    try:
        yield
    finally:
        STATE.loading = outer


def foreign_functions_allowed() -> bool:
    """Whether a `!function` may name a module that is not a file beside its YAML: only when
    the run passes --confirm-run-unsafe-code (a task file cannot consent for the user)."""
    return STATE.consent


def trust_files(files: list[str]) -> None:
    """Files of a task found to run code with consent (unsafe_code): no longer guarded."""
    STATE.unguarded_files.update(files)


@contextmanager
def importing_task_file(file: Path, yaml_file: Path) -> Iterator[None]:
    """The import of a task's own Python file (a `!function` module beside its YAML) runs
    guarded, and so does every frame of that file's folder from then on (its process_docs,
    doc_to_text, threads and exit handlers): the guard is installed before the file runs.
    A refusal the module caught is raised when the import ends."""
    loading, unsafe = STATE.loading
    if unsafe:
        STATE.unguarded_files.add(str(file))
        yield
        return
    install()
    folder = str(file.parent) + os.sep
    if folder in too_wide():
        yield
        return
    STATE.task_files.add(str(file))
    task = STATE.tasks.get(folder)
    if task is None:
        where = loading or f"{yaml_file}"
        task = GuardedTask(file.name, where, (folder,), STATE.consent)
        STATE.tasks[folder] = task
    with running(task):
        try:
            yield
        finally:
            if task.refusals:
                raise first(task) from None


def own_files(config: TaskConfig) -> list[str]:
    """The files of the task's own Python that sees model output: process_results, metric and
    custom filter functions (and an lm-eval class task's class)."""
    roots: list[Any] = []
    if config.process_results is not None:
        roots.append(config.process_results)
    roots += [s.function for s in config.metrics if isinstance(s, MetricSpec) and s.function]
    for _, steps in config.filters:
        for _, kwargs in steps:
            roots += [v for v in (kwargs or {}).values() if callable(v)]
    files = []
    for root in roots:
        owner = getattr(root, "__self__", None) if isinstance(root, MethodType) else None
        if owner is not None and isinstance(getattr(owner, "cls", None), type):
            root = owner.cls  # assay's adapter for an lm-eval class task: the class is the task's
        module = sys.modules.get(getattr(root, "__module__", "") or "")
        if (module is not None and module.__name__.startswith("assay.")) or module is None:
            continue
        code = getattr(getattr(root, "__func__", root), "__code__", None)
        file = code.co_filename if code is not None else getattr(module, "__file__", None)
        if file:
            files.append(str(file))
    return files


def _sandbox_promised(config: TaskConfig) -> bool:
    from assay.tasks.code_routes import code_route

    return code_route(config).route == "code_eval"


def _evaluate_metrics(config: TaskConfig) -> bool:
    return any(isinstance(s, MetricSpec) and s.hf_evaluate for s in config.metrics)


@contextmanager
def scoring_window(config: TaskConfig, confirmed: bool) -> Iterator[None]:
    """While the body runs (a guarded task's filters or scoring), the task's Python may run no
    code of its own; a refusal is raised at the end even if the task's code caught it."""
    task = guarded_task(config, confirmed)
    if task is None:
        yield
        return
    finalizers = set(weakref.finalize._registry)  # type: ignore[attr-defined]
    handlers = exit_handlers()
    with running(task):
        try:
            yield
        finally:
            guard_finalizers(finalizers, task)
            if exit_handlers() > handlers:
                guard_exit(task)
            if task.refusals:  # even when the task's code caught it, or turned it into another
                raise first(task) from None


SETTLE_SECONDS = 5.0
"""How long a run waits, before it writes its results, for the threads and timers its guarded
tasks started (a timer that fires later is still caught: `exit_nonzero_after_late_refusals`)."""


def settle(seconds: float = SETTLE_SECONDS) -> None:
    """Wait (at most `seconds`) for the non-daemon threads guarded tasks started to end, then
    raise the first refusal any guarded task met: a run calls this before it writes its
    results as a success."""
    state = STATE
    with state.ended:
        state.ended.wait_for(lambda: not state.threads, timeout=seconds)
    raise_pending()


def results_written(path: Path) -> None:
    """The run wrote `path` as a success: a refusal recorded later (as the process ends)
    marks it as a failed run (`exit_nonzero_after_late_refusals`)."""
    with contextlib.suppress(OSError):  # gone already: nothing of this run's to mark later
        STATE.results_files.append((path, path.read_bytes()))


def raise_pending() -> None:
    """Raise the first refusal a guarded task met outside its scoring windows (a thread, an
    exit or finalizer callback, its aggregation), if any."""
    for task in STATE.tasks.values():
        if task.refusals:
            raise first(task)


def exit_nonzero_after_late_refusals() -> None:
    """In the `assay` command's process: a refusal recorded after the run stopped checking (a
    thread or timer the task started that fires as the process ends, an exit handler) makes
    the process exit with code 2, after Python joined the task's threads."""
    import atexit

    def check() -> None:
        late = [t for t in {id(t): t for t in STATE.tasks.values()}.values() if t.refusals]
        if late:
            refusal = late[0].refusals[0]
            failed = [str(p) for p, text in STATE.results_files if mark_failed(p, text, refusal)]
            marked = f"; {', '.join(failed)} now records a failed run" if failed else ""
            print(
                f"assay: error: {late[0].where}: its Python was refused an operation after the "
                f"run's checks (said above){marked}; the run's results are not to be trusted: "
                "exit code 2.",
                file=sys.stderr,
            )
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(2)

    atexit.register(check)  # registered first, so it runs last
