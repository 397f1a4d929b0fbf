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
"""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, MethodType
from typing import Any

from assay.errors import ConfigError
from assay.tasks.config import MetricSpec, TaskConfig


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


_PROCESS_EVENTS = frozenset(
    {"os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty",
     "os.startfile", "subprocess.Popen", "_posixsubprocess.fork_exec",
     "cpython.PyInterpreterState_New"}
)  # fmt: skip
"""A new process, or a new interpreter in this one (whose own hooks start empty)."""
_CODE_EVENTS = frozenset({"compile", "exec", "marshal.loads", "marshal.load", "code.__new__"})
_WATCHED = _PROCESS_EVENTS | _CODE_EVENTS

_IMPORT_FILES = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")
_CLASS_BUILDERS = frozenset({"dataclasses", "collections", "typing", "enum", "ast"})
"""Standard-library modules that compile source they write themselves, from names they check
(identifiers), or only parse it (ast)."""


@dataclass
class _State:
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


_STATE = _State()


def guarded_task(config: TaskConfig, confirmed: bool) -> GuardedTask | None:
    """The guard's record of `config`, made (and the hook installed) the first time: None for a
    task that declares unsafe_code or has no Python of its own that sees model output."""
    state = _STATE
    if (known := state.tasks.get(id(config))) is not None or id(config) in state.unguarded:
        return known
    files = own_files(config)
    promised = config.unsafe_code and _sandbox_promised(config)
    if (config.unsafe_code and not promised) or (not files and not _evaluate_metrics(config)):
        if config.unsafe_code:
            state.unguarded_files.update(files)
        state.unguarded[id(config)] = config
        return None
    _install()
    state.unguarded_files.difference_update(files)
    confirmed = confirmed and not promised
    folders = tuple(sorted({str(Path(f).parent) + os.sep for f in files} - _too_wide()))
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
    _STATE.consent = confirmed
    for key, task in _STATE.tasks.items():
        task.refusals.clear()
        if isinstance(key, str):
            task.confirmed = confirmed


@contextmanager
def loading_task(where: str, unsafe: bool) -> Iterator[None]:
    """While the body builds the task `where` from its YAML: whether that YAML declares
    unsafe_code (its files' imports are then not guarded)."""
    outer, _STATE.loading = _STATE.loading, (where, unsafe)
    try:
        yield
    finally:
        _STATE.loading = outer


def foreign_functions_allowed() -> bool:
    """Whether a `!function` may name a module that is not a file beside its YAML: only when
    the run passes --confirm-run-unsafe-code (a task file cannot consent for the user)."""
    return _STATE.consent


def trust_files(files: list[str]) -> None:
    """Files of a task found to run code with consent (unsafe_code): no longer guarded."""
    _STATE.unguarded_files.update(files)


@contextmanager
def importing_task_file(file: Path, yaml_file: Path) -> Iterator[None]:
    """The import of a task's own Python file (a `!function` module beside its YAML) runs
    guarded, and so does every frame of that file's folder from then on (its process_docs,
    doc_to_text, threads and exit handlers): the guard is installed before the file runs.
    A refusal the module caught is raised when the import ends."""
    loading, unsafe = _STATE.loading
    if unsafe:
        _STATE.unguarded_files.add(str(file))
        yield
        return
    _install()
    folder = str(file.parent) + os.sep
    if folder in _too_wide():
        yield
        return
    _STATE.task_files.add(str(file))
    task = _STATE.tasks.get(folder)
    if task is None:
        where = loading or f"{yaml_file}"
        task = GuardedTask(file.name, where, (folder,), _STATE.consent)
        _STATE.tasks[folder] = task
    with _running(task):
        try:
            yield
        finally:
            if task.refusals:
                raise _first(task) from None


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


def _too_wide() -> set[str]:
    """Folders that hold assay or the installed packages: never a task's own folder."""
    return {os.path.join(root, "") for root in _STATE.library_roots} | {
        os.path.join(str(p), "") for p in Path(_STATE.trusted[0]).parents
    }


@contextmanager
def scoring_window(config: TaskConfig, confirmed: bool) -> Iterator[None]:
    """While the body runs (a guarded task's filters or scoring), the task's Python may run no
    code of its own; a refusal is raised at the end even if the task's code caught it."""
    task = guarded_task(config, confirmed)
    if task is None:
        yield
        return
    finalizers = set(weakref.finalize._registry)  # type: ignore[attr-defined]
    exit_handlers = _exit_handlers()
    with _running(task):
        try:
            yield
        finally:
            _guard_finalizers(finalizers, task)
            if _exit_handlers() > exit_handlers:
                _guard_exit(task)
            if task.refusals:  # even when the task's code caught it, or turned it into another
                raise _first(task) from None


@contextmanager
def _running(task: GuardedTask) -> Iterator[None]:
    """The calling thread runs `task`'s Python while the body runs."""
    ident = threading.get_ident()
    outer = _STATE.active.get(ident)
    _STATE.active[ident] = task
    try:
        yield
    finally:
        if outer is None:
            _STATE.active.pop(ident, None)
        else:
            _STATE.active[ident] = outer


def raise_pending() -> None:
    """Raise the first refusal a guarded task met outside its scoring windows (a thread, an
    exit or finalizer callback, its aggregation), if any."""
    for task in _STATE.tasks.values():
        if task.refusals:
            raise _first(task)


def exit_nonzero_after_late_refusals() -> None:
    """In the `assay` command's process: a refusal recorded after the run stopped checking (a
    thread or timer the task started that fires as the process ends, an exit handler) makes
    the process exit with code 2, after Python joined the task's threads."""
    import atexit

    def check() -> None:
        late = [t for t in {id(t): t for t in _STATE.tasks.values()}.values() if t.refusals]
        if late:
            print(
                f"assay: error: {late[0].where}: its Python was refused an operation after the "
                "run's checks (said above); the run's results are not to be trusted: exit "
                "code 2.",
                file=sys.stderr,
            )
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(2)

    atexit.register(check)  # registered first, so it runs last


def _first(task: GuardedTask) -> CodeRunRefused:
    """The task's first refusal, reported once (the list empties)."""
    first = task.refusals[0]
    task.refusals.clear()
    return first


def _exit_handlers() -> int:
    import atexit

    return int(atexit._ncallbacks())


def _guard_finalizers(before: set[Any], task: GuardedTask) -> None:
    """weakref.finalize callbacks the task registered run inside its window when they fire."""
    registry = weakref.finalize._registry  # type: ignore[attr-defined]
    for key in set(registry) - before:
        info = registry[key]
        info.func = _in_window(info.func, task)


def _in_window(func: Any, task: GuardedTask) -> Any:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        with _running(task):
            try:
                return func(*args, **kwargs)
            except CodeRunRefused:
                # Already said and recorded (the run reports it, or the exit code does): the
                # thread's default report would print a traceback from inside the window.
                return None

    return guarded


def _guard_exit(task: GuardedTask) -> None:
    """atexit runs callbacks last-registered first: one registered now runs before the task's,
    and keeps the task's window open for them."""
    import atexit

    def open_for_exit() -> None:
        _STATE.at_exit = task

    atexit.register(open_for_exit)


def _install() -> None:
    state = _STATE
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
    sys.addaudithook(_hook)
    _audit_fork_exec()
    _follow_threads()
    _check_exit_handlers()
    _quiet_thread_refusals()


_ORIGINALS: dict[str, Any] = {}
"""The functions the guard wraps, by "module.name": the wrappers look them up here rather
than hold them in a closure or attribute a task could read (`fork_exec.__closure__`); a task
that reads this module's globals through a wrapper's `__globals__` can still reach them (see
docs/reliability.md)."""

_WRAPPED_MODULES = frozenset({"_posixsubprocess", "_thread", "threading", "atexit"})
"""Modules whose functions the guard wraps: importing one afresh (after taking it out of
sys.modules) would give the unwrapped functions back, so a guarded task may not."""

_GC_EVENTS = frozenset({"gc.get_referents", "gc.get_referrers", "gc.get_objects"})
"""Walks of the object graph, another way to the originals the wrappers call."""


def _wrap(module: Any, name: str, make: Any) -> None:
    """Replace `module.name` by `make(key)`, keeping the original in _ORIGINALS."""
    key = f"{module.__name__}.{name}"
    original = getattr(module, name, None)
    if original is None or key in _ORIGINALS:
        return
    _ORIGINALS[key] = original
    setattr(module, name, make(key))


def _follow_threads() -> None:
    """A thread started while a guarded task's Python runs runs that task's Python too (a
    `Thread(target=os.system)` has no frame of the task's files): every way Python starts a
    thread passes its function through here first."""
    import _thread

    for module in (_thread, threading):
        for name in ("start_new_thread", "_start_new_thread", "start_joinable_thread",
                     "_start_joinable_thread"):  # fmt: skip
            _wrap(module, name, _starting_threads)


def _quiet_thread_refusals() -> None:
    """A refusal ending one of the task's threads was said and recorded as it happened: the
    thread's default report would add a traceback (and format it from inside the window)."""
    original = threading.excepthook

    def excepthook(args: Any) -> None:
        if not (isinstance(args.exc_type, type) and issubclass(args.exc_type, CodeRunRefused)):
            original(args)

    threading.excepthook = excepthook


def _starting_threads(key: str) -> Any:
    def start(function: Any, *args: Any, **kwargs: Any) -> Any:
        task = _task_here(sys._getframe(1))
        if task is not None:
            function = _in_window(function, task)
        return _ORIGINALS[key](function, *args, **kwargs)

    return start


def _check_exit_handlers() -> None:
    """An exit handler that is itself a runner (atexit.register(os.system, cmd)) is refused
    when registered, inside the window, so the run stops with exit code 2: at exit a refusal can
    only be printed. Any other handler a guarded task registers runs guarded (`_guard_exit`)."""
    import atexit

    _wrap(atexit, "register", _registering)
    _wrap(threading, "_register_atexit", _registering)  # runs as threads are joined at exit


def _registering(key: str) -> Any:
    def register(function: Any, *args: Any, **kwargs: Any) -> Any:
        task = _task_here(sys._getframe(1))
        if task is not None and _runs_code(function):
            _refuse(task, "atexit.register", (function,), None)
        return _ORIGINALS[key](function, *args, **kwargs)

    return register


def _runs_code(function: Any) -> bool:
    """Whether `function` (or what a functools.partial wraps) is a function that runs code."""
    import functools

    from assay.tasks.code_routes import _runner

    while isinstance(function, functools.partial):
        function = function.func
    return _runner(function, getattr(function, "__name__", "")) is not None


def _audit_fork_exec() -> None:
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


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event == "import":
        if args and args[0] in _WRAPPED_MODULES:
            _refuse_reimport(event, args)
        return
    if event in _GC_EVENTS:
        _refuse_reimport(event, args)
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
    _refuse(found[0], event, args, found[1])


def _refuse_reimport(event: str, args: tuple[Any, ...]) -> None:
    """A guarded task importing a wrapped module afresh, or walking the object graph, is
    refused: both lead back to the functions the guard wraps."""
    caller = sys._getframe(2)
    for frame in _frames(caller):
        if frame.f_code.co_filename.startswith(_STATE.trusted):
            return
    task = _task_here(caller)
    if task is not None:
        own = next((f for f in _frames(caller) if _task_of(f.f_code.co_filename)), None)
        _refuse(task, event, args, own)


def _frames(frame: FrameType | None) -> Iterator[FrameType]:
    while frame is not None:
        yield frame
        frame = frame.f_back


def _refuse(task: GuardedTask, event: str, args: tuple[Any, ...], frame: FrameType | None) -> None:
    """Raise (and record) the refusal of `event`; with the consent flag, say so once instead."""
    refusal = CodeRunRefused(_message(task, event, args, frame))
    if task.confirmed:
        if not task.announced:
            task.announced = True
            print(f"assay: {refusal}", file=sys.stderr)
        return
    task.refusals.append(refusal)
    if _STATE.at_exit is not None or threading.current_thread() is not threading.main_thread():
        print(f"assay: {refusal}", file=sys.stderr)  # the run reports it later, or never
    raise refusal


def _task_here(caller: FrameType | None) -> GuardedTask | None:
    """The guarded task whose Python the current thread runs at `caller`, if any."""
    current = caller
    while current is not None:
        if (task := _task_of(current.f_code.co_filename)) is not None:
            return task
        current = current.f_back
    state = _STATE
    return state.active.get(threading.get_ident()) or state.at_exit


def _judge(
    event: str, args: tuple[Any, ...], caller: FrameType | None
) -> tuple[GuardedTask, FrameType | None] | None:
    """The guarded task whose Python asks for `event`, and its innermost frame; None when the
    event is allowed."""
    state = _STATE
    task, frame, importing = None, None, False
    current: FrameType | None = caller
    while current is not None:
        file = current.f_code.co_filename
        if file.startswith(state.trusted):
            return None  # assay's sandbox starting a program (and making itself non-dumpable)
        if file in _IMPORT_FILES:
            importing = True
        elif (task := _task_of(file)) is not None:
            frame = current
            break
        current = current.f_back
    if task is None:
        task = state.active.get(threading.get_ident()) or state.at_exit
        if task is None:
            return None
    if event in _PROCESS_EVENTS:
        return task, frame
    if event.startswith("ctypes."):
        return None if importing else (task, frame)
    return None if caller and _allowed_code(event, args, caller) else (task, frame)


def _task_of(file: str) -> GuardedTask | None:
    state = _STATE
    if file in state.unguarded_files:
        return None
    for task in state.tasks.values():
        if file.startswith(task.folders):
            return task
    return None


def _allowed_code(event: str, args: tuple[Any, ...], caller: FrameType) -> bool:
    """Whether compiling or running code here is an import, a class builder's, or an installed
    library's own (see the module's docstring)."""
    state = _STATE
    file = caller.f_code.co_filename
    if file in _IMPORT_FILES:
        if event != "compile":
            return True
        path = args[1] if len(args) > 1 else None
        return path in state.task_files or _written_before(path, state.installed_at)
    if _task_of(file) is not None:
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


def _message(task: GuardedTask, event: str, args: tuple[Any, ...], frame: FrameType | None) -> str:
    what = _event_words(event, args)
    if frame is not None:
        at = f"at {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_qualname}()"
    else:
        at = (
            "in code the task started (a thread, callback or code object of its own; no frame "
            f"of its files is on the stack, thread {threading.current_thread().name!r})"
        )
    if task.sandbox_promised:
        return (
            f"{task.where}: the task's Python tried to {what} {at}. The task sends model-written "
            "programs to code_eval, which assay runs in its sandbox, and the run said so; this "
            "would run outside it, in assay's process, so assay's runtime guard refused it, "
            "even with --confirm-run-unsafe-code. Run programs only through code_eval, or, if "
            "you trust the task to run them in this process, take code_eval out of its Python "
            "(the run then says they run in this process, NOT in the sandbox)."
        )
    if task.confirmed:
        return (
            f"{task.where}: the task's Python runs code of its own: it asked to {what} {at}, "
            "which assay's runtime guard saw (its static scan of the task's files had not). "
            "--confirm-run-unsafe-code lets it run: what it runs (model output included) runs "
            "in this process, NOT in the sandbox: your files, network and keys in reach."
        )
    return (
        f"{task.where}: the task's Python tried to {what} {at}, though the task does not "
        "declare unsafe_code; assay's runtime guard refused it (assay's static scan of the "
        "task's files had not found it). Whatever it runs (model output included) would run in "
        "this process, with no sandbox: your files, network and keys in reach. If you trust "
        "the task's code, declare `unsafe_code: true` in its YAML or pass "
        "--confirm-run-unsafe-code; the run then says that model-written code runs in this "
        "process."
    )


def _event_words(event: str, args: tuple[Any, ...]) -> str:
    def shown(value: Any) -> str:
        text = repr(value)
        return text if len(text) <= 80 else text[:77] + "..."

    if event in _PROCESS_EVENTS:
        return f"start a process ({event} {', '.join(shown(a) for a in args[:2])})"
    if event == "compile":
        return f"compile Python source ({shown(args[0])}, {shown(args[1])})"
    if event == "exec":
        return f"run a code object ({shown(args[0])})"
    if event == "code.__new__":
        return "build a code object (types.CodeType)"
    if event.startswith("marshal."):
        return f"load code with {event}"
    if event == "import":
        return f"import {args[0]} afresh (undoing the guard's wrappers)"
    if event in _GC_EVENTS:
        return f"walk the object graph ({event})"
    if event == "atexit.register":
        return f"register an exit handler that runs code ({shown(args[0])})"
    return f"call into C with ctypes ({event})"
