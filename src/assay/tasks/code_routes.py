"""Where a code task's model-written programs run: assay's sandbox, or the task's own Python.

A task that executes model-written code (`unsafe_code`) scores it one of three ways, told
apart by the functions that score it (process_results, `!function` and evaluate metrics):

- assay's own code metrics (the built-in humaneval and mbpp, and the LiveCodeBench
  metric of converted task files, which assay scores itself): each program runs in the sandbox;
- evaluate's `code_eval` (lm-eval's mbpp and humaneval YAMLs): assay hands the task's module
  a sandboxed one (`assay.sandbox.code_eval`), so each program runs in the sandbox, while the
  module's own code runs in assay's process;
- anything else (lm-eval's cruxeval, longproc's pseudo_to_code): the task's Python runs the
  programs its own way, in assay's process, where no sandbox reaches.

The run prints one line per code task saying which (`describe`).

A task that does not declare `unsafe_code` is checked by what its scoring runs
(`runs_code_itself`): when the Python that sees model output (process_results, metric and
custom filter functions, the functions of the task's own files they call, and the top level
of those files) could run code
(exec, eval, compile, a process, ctypes ..., or a lookup by a computed name that could reach
any of them: `getattr(builtins, name)`, `vars()`, `globals()`, `__builtins__`), the task counts as a code task whose programs
run in this process: the run is refused without --confirm-run-unsafe-code, naming the file,
function and line, and says so when it runs.
"""

from __future__ import annotations

import ast
import builtins
import dis
import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FunctionType, MethodType, ModuleType
from typing import Any, Literal

from assay.tasks.config import MetricSpec, TaskConfig

Route = Literal["assay", "code_eval", "in_process"]
"""How a code task runs its programs (see the module's docstring)."""


@dataclass(frozen=True)
class CodeRoute:
    """How one code task runs model-written programs."""

    route: Route
    files: tuple[str, ...]
    """The task's own Python files that score it (none for assay's code metrics)."""
    runs_code: tuple[str, ...] = ()
    """Where those files could run code themselves ("utils.py:12 exec"): a task module that
    holds code_eval but also does this is not shown to send every program to the sandbox."""

    @property
    def sandboxed(self) -> bool:
        """Whether every program the scoring hands to a code runner runs in the sandbox."""
        return self.route != "in_process"


def _scorers(config: TaskConfig) -> Iterator[Callable[..., Any]]:
    if config.process_results is not None:
        yield config.process_results
    for spec in config.metrics:
        if isinstance(spec, MetricSpec) and spec.function is not None:
            yield spec.function


def _filter_functions(config: TaskConfig) -> Iterator[Callable[..., Any]]:
    """The task's own functions among its filters' arguments (custom filter_fn ...)."""
    for _, steps in config.filters:
        for _, kwargs in steps:
            yield from (v for v in (kwargs or {}).values() if callable(v))


def _peer_code_metric(config: TaskConfig) -> bool:
    """Another harness's metric that runs programs (LiveCodeBench's): assay scores it sandboxed
    (`assay.compat`)."""
    return any(
        isinstance(s, MetricSpec) and s.peer is not None and s.peer.runs_model_code
        for s in config.metrics
    )


def _names_code_eval(config: TaskConfig) -> bool:
    """An `hf_evaluate: true` (or lm-eval fallback) metric named code_eval: served sandboxed."""
    from assay.sandbox.code_eval import NAMES

    return any(isinstance(s, MetricSpec) and s.name in NAMES for s in config.metrics)


def code_route(config: TaskConfig) -> CodeRoute:
    """How `config`'s scoring runs model-written programs."""
    from assay.sandbox.code_eval import holds_code_eval

    scorers = list(_scorers(config))
    own = [f for f in scorers if not getattr(f, "__module__", "").startswith("assay.")]
    files = tuple(
        dict.fromkeys(
            code.co_filename for f in own if (code := getattr(f, "__code__", None)) is not None
        )
    )
    if not own and (scorers or _peer_code_metric(config)):
        return CodeRoute("assay", ())
    runs_code = tuple(found for file in files for found in code_runners(file))
    if runs_code:
        return CodeRoute("in_process", files, runs_code)
    if _names_code_eval(config) or any(holds_code_eval(getattr(f, "__globals__", {})) for f in own):
        return CodeRoute("code_eval", files)
    return CodeRoute("in_process", files)


_RUNNING_GLOBALS = frozenset({"exec", "eval", "compile", "__import__", "breakpoint"})
_RUNNING_MODULES = frozenset(
    {"subprocess", "multiprocessing", "ctypes", "runpy", "pty", "code", "codeop", "importlib",
     "pickle", "marshal", "dill", "cloudpickle", "_posixsubprocess"}
)  # fmt: skip
_READING_MODULES = ("importlib.metadata", "importlib.resources", "importlib.machinery")
"""Parts of importlib that read package data and run nothing."""
_RUNNING_ATTRIBUTES = frozenset(
    {"system", "popen", "fork", "forkpty", "execv", "execve", "execvp", "execvpe", "execl",
     "execle", "execlp", "spawnv", "spawnve", "spawnl", "posix_spawn", "posix_spawnp", "Popen",
     "run_path", "run_module", "import_module", "exec_module", "fork_exec"}
)  # fmt: skip


_REFLECTIVE_GLOBALS = frozenset({"getattr", "vars", "globals", "locals", "__builtins__"})
"""Builtins that reach objects by a name computed at run time: `getattr(builtins, "ex" +
"ec")` is exec under another spelling, so a use the scan cannot read counts as running code.
A `getattr` whose name is a literal string that runs nothing (`getattr(doc, "few_shot",
None)`) is read and passes."""
_REFLECTIVE_ATTRIBUTES = frozenset(
    {"__builtins__", "__globals__", "__code__", "__subclasses__", "__getattribute__", "__dict__"}
)
"""Attributes that lead from any object to the builtins or to code objects."""


@functools.cache
def _literal_getattr_lines(file: str) -> frozenset[int]:
    """Lines of `file` whose every getattr/setattr/delattr call names its attribute by a
    literal string that runs nothing."""
    try:
        tree = ast.parse(Path(file).read_bytes(), file)
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    calls: dict[int, bool] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "delattr")
        ):
            name = node.args[1] if len(node.args) > 1 else None
            literal = (
                isinstance(name, ast.Constant)
                and isinstance(name.value, str)
                and name.value not in _RUNNING_GLOBALS | _RUNNING_ATTRIBUTES
                and name.value not in _REFLECTIVE_ATTRIBUTES
            )
            calls[node.lineno] = calls.get(node.lineno, True) and literal
    return frozenset(line for line, ok in calls.items() if ok)


def _reflective(name: str, file: str, line: int | None) -> bool:
    """Whether the global `name`, loaded at `line` of `file`, reaches objects by a computed
    name (see _REFLECTIVE_GLOBALS)."""
    if name not in _REFLECTIVE_GLOBALS:
        return False
    return not (name == "getattr" and line in _literal_getattr_lines(file))


def code_runners(file: str) -> list[str]:
    """Where the Python file `file` could run code of its own: calls of exec, eval, compile or
    __import__, imports of subprocess, multiprocessing, ctypes, runpy ..., and os.system /
    fork / exec* / spawn* / Popen ("utils.py:12 exec"). A file that cannot be read counts as
    one that could."""
    try:
        code = compile(Path(file).read_bytes(), file, "exec")
    except (OSError, SyntaxError, ValueError):
        return [f"{file}: cannot be read to check"]
    found: list[str] = []
    stack = [code]
    while stack:
        current = stack.pop()
        stack += [c for c in current.co_consts if hasattr(c, "co_code")]
        for ins in dis.get_instructions(current):
            name = ins.argval if isinstance(ins.argval, str) else ""
            line = ins.positions.lineno if ins.positions else None
            if (
                (ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and name in _RUNNING_GLOBALS)
                or (ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and _reflective(name, file, line))
                or (ins.opname == "IMPORT_NAME" and name.split(".")[0] in _RUNNING_MODULES)
                or (ins.opname == "IMPORT_NAME" and name == "builtins")
                or (
                    ins.opname in ("LOAD_ATTR", "LOAD_METHOD")
                    and name in _RUNNING_ATTRIBUTES | _REFLECTIVE_ATTRIBUTES
                )
            ):
                found.append(f"{Path(file).name}:{line} {name}")
    return sorted(set(found))


@dataclass(frozen=True)
class CodeRun:
    """A place where a task's scoring code could run code of its own."""

    file: str
    line: int | None
    function: str
    """The qualified name of the function holding it."""
    what: str
    """What it calls or imports: exec, eval, subprocess, os.system ..."""

    def __str__(self) -> str:
        where = "at its top level" if self.function == "<module>" else f"in {self.function}()"
        return f"{Path(self.file).name}:{self.line} {self.what} {where}"


_MAX_FUNCTIONS = 500
"""How many of a task's functions the scan follows at most (a bound, not a limit met)."""


def runs_code_itself(config: TaskConfig) -> list[CodeRun]:
    """Where the Python that scores `config` could run code itself: its process_results,
    metric and custom filter functions, every function or class method of the task's own
    folders they name, followed through their globals, and the top level of those functions'
    modules (class bodies, default arguments and module-level statements included). assay's own functions (built-in
    tasks) are not scanned: they run programs in the sandbox."""
    roots = [
        f
        for f in (*_scorers(config), *_filter_functions(config))
        if not getattr(f, "__module__", "").startswith("assay.")
    ]
    folders = {
        str(Path(code.co_filename).parent) + os.sep
        for f in roots
        if (code := getattr(f, "__code__", None)) is not None
    }
    found: dict[tuple[str, int | None, str], CodeRun] = {}
    seen: set[CodeType] = set()
    modules: set[str] = set()
    stack = list(roots)
    while stack and len(seen) < _MAX_FUNCTIONS:
        function = stack.pop()
        if isinstance(function, MethodType):
            function = function.__func__
        code = getattr(function, "__code__", None)
        if not isinstance(code, CodeType) or code in seen:
            continue
        seen.add(code)
        namespace = getattr(function, "__globals__", {})
        scans = [_scan(code, namespace)]
        module = _module_code(namespace, folders, modules)
        if module is not None:  # its top level ran as it imported: read it as well
            scans.append(_scan(module, namespace, _runs_at_import, imports=False))
        for run in (run for scan in scans for run in scan):
            if isinstance(run, CodeRun):
                found.setdefault((run.file, run.line, run.what), run)
            elif _own(run, folders):
                stack += _functions_of(run)
    return sorted(found.values(), key=lambda r: (r.file, r.line or 0, r.what))


def _module_code(namespace: dict[str, Any], folders: set[str], done: set[str]) -> CodeType | None:
    """The top-level code of the module whose globals are `namespace`, the first time it is
    asked for, when that module is a file of the task's own folders (None otherwise)."""
    file = namespace.get("__file__")
    if not isinstance(file, str) or file in done or not file.startswith(tuple(folders)):
        return None
    done.add(file)
    try:
        return compile(Path(file).read_bytes(), file, "exec")
    except (OSError, SyntaxError, ValueError):
        return None  # it imported, so it compiled: a file changed since is the guard's


def _runs_at_import(code: CodeType) -> bool:
    """Whether nested `code` runs as its module's top level runs: a class body, a
    comprehension or generator, a lambda (conservatively); a function's body runs only when
    called (the scan follows the functions the top level names)."""
    import inspect

    return code.co_name.startswith("<") or not code.co_flags & inspect.CO_OPTIMIZED


def _own(obj: Any, folders: set[str]) -> bool:
    """Whether `obj` (a function or class) is defined in one of the task's own folders."""
    module = getattr(obj, "__module__", None)
    if isinstance(obj, type):
        import sys

        file = getattr(sys.modules.get(module or ""), "__file__", None) or ""
    else:
        code = getattr(obj, "__code__", None)
        file = code.co_filename if isinstance(code, CodeType) else ""
    return any(file.startswith(folder) for folder in folders)


def _functions_of(obj: Any) -> list[Any]:
    if isinstance(obj, type):
        return [
            getattr(v, "__func__", v)
            for v in vars(obj).values()
            if isinstance(getattr(v, "__func__", v), FunctionType)
        ]
    return [obj]


def _scan(
    code: CodeType,
    namespace: dict[str, Any],
    descend: Callable[[CodeType], bool] = lambda c: True,
    imports: bool = True,
) -> Iterator[CodeRun | Any]:
    """For one function's code (and the lambdas, comprehensions and nested functions in it,
    those `descend` accepts): a CodeRun for each call or import that could run code, and each
    other global it names that is a function or class (for the caller to follow). Without
    `imports`, (a module's top level) an import is no finding: what it binds is judged where
    it is used."""
    stack = [code]
    while stack:
        current = stack.pop()
        stack += [c for c in current.co_consts if isinstance(c, CodeType) and descend(c)]
        receiver: Any = None
        for ins in dis.get_instructions(current):
            name = ins.argval if isinstance(ins.argval, str) else ""
            line = ins.positions.lineno if ins.positions else None
            what = None
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                value = namespace.get(name, getattr(builtins, name, None))
                what = _runner(value, name)
                if (
                    what is None
                    and name not in namespace
                    and _reflective(name, current.co_filename, line)
                ):
                    what = f"{name} (a lookup by a computed name)"
                if what is None and isinstance(value, FunctionType | type):
                    yield value
                receiver = value
            elif (
                imports
                and ins.opname == "IMPORT_NAME"
                and (name.split(".")[0] in _RUNNING_MODULES or name == "builtins")
            ):
                what = name
            elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD"):
                if name in _REFLECTIVE_ATTRIBUTES:
                    what = name
                elif isinstance(receiver, ModuleType):
                    what = _runner(getattr(receiver, name, None), f"{receiver.__name__}.{name}")
                elif name in _RUNNING_ATTRIBUTES:
                    what = name
                receiver = None
            if what is not None:
                yield CodeRun(current.co_filename, line, code.co_qualname, what)


def _runner(value: Any, name: str) -> str | None:
    """`name` when `value` (what a name is bound to) runs code: the builtins exec, eval,
    compile, __import__; subprocess, multiprocessing, ctypes ... or a function of theirs;
    os.system, fork, exec*, spawn*, popen."""
    if value is None:
        return name if name in _RUNNING_GLOBALS else None
    if value is builtins or any(value is getattr(builtins, b) for b in _RUNNING_GLOBALS):
        return name
    module = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", "")
    if not isinstance(module, str) or module.startswith(_READING_MODULES):
        return None
    if module.split(".")[0].lstrip("_") in _RUNNING_MODULES:
        return name
    if module in ("os", "posix") and getattr(value, "__name__", "") in _RUNNING_ATTRIBUTES:
        return name
    return None


WHERE_CODE_RUNS = (
    "assay's built-in code metrics (humaneval, mbpp) and evaluate's code_eval (which lm-eval's "
    "mbpp and humaneval YAMLs call) run each program in a subprocess in the --sandbox you "
    "choose (default auto: a bubblewrap namespace sandbox with no network and no access to "
    "your files, or a refusal where none can start); a task's own scoring code (a '!function' "
    "metric, process_results) runs in this process, not sandboxed, and so do programs it runs "
    "some other way than code_eval."
)
"""What the consent refusals say about where a code task's programs run."""


def describe(name: str, route: CodeRoute, where: str) -> str:
    """The line a run prints for code task `name`; `where` names the sandbox (e.g. bwrap)."""
    files = ", ".join(route.files) or "its scoring functions"
    if route.route == "assay":
        return f"assay: task {name}: each model-written program runs in the {where} sandbox."
    if route.route == "code_eval":
        return (
            f"assay: task {name}: model-written programs go to evaluate's code_eval, which "
            f"assay serves itself: each runs in the {where} sandbox. The task's own Python "
            f"({files}) runs in this process."
        )
    how = (
        f"may run code itself ({', '.join(route.runs_code[:5])}: found by assay's static "
        "scan of its files), so assay cannot show that "
        "every model-written program goes to its sandbox: treat them as running"
        if route.runs_code
        else "runs model-written code its own way, not through code_eval, so"
    )
    return (
        f"assay: task {name}: its own Python ({files}) {how} in this process and NOT in the "
        "sandbox: nothing is isolated (network, your files, your environment and keys, "
        "memory, processes). --confirm-run-unsafe-code accepts that."
    )
