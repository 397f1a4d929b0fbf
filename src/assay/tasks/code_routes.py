"""Where a code task's model-written programs run: assay's sandbox, or the task's own Python.

A task that executes model-written code (`unsafe_code`) scores it one of three ways, told
apart by the functions that score it (process_results, `!function` and evaluate metrics):

- assay's own code metrics (the built-in humaneval and mbpp): each program runs in the sandbox;
- evaluate's `code_eval` (lm-eval's mbpp and humaneval YAMLs): assay hands the task's module
  a sandboxed one (`assay.sandbox.code_eval`), so each program runs in the sandbox, while the
  module's own code runs in assay's process;
- anything else (lm-eval's cruxeval, longproc's pseudo_to_code): the task's Python runs the
  programs its own way, in assay's process, where no sandbox reaches.

The run prints one line per code task saying which (`describe`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
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
    if not own and scorers:
        return CodeRoute("assay", ())
    runs_code = tuple(found for file in files for found in code_runners(file))
    if runs_code:
        return CodeRoute("in_process", files, runs_code)
    if _names_code_eval(config) or any(holds_code_eval(getattr(f, "__globals__", {})) for f in own):
        return CodeRoute("code_eval", files)
    return CodeRoute("in_process", files)


_RUNNING_GLOBALS = frozenset({"exec", "eval", "compile", "__import__", "breakpoint"})
_RUNNING_MODULES = frozenset(
    {"subprocess", "multiprocessing", "ctypes", "runpy", "pty", "code", "codeop", "importlib"}
)
_RUNNING_ATTRIBUTES = frozenset(
    {"system", "popen", "fork", "forkpty", "execv", "execve", "execvp", "execvpe", "execl",
     "execle", "execlp", "spawnv", "spawnve", "spawnl", "posix_spawn", "posix_spawnp", "Popen",
     "run_path", "run_module", "import_module", "exec_module"}
)  # fmt: skip


def code_runners(file: str) -> list[str]:
    """Where the Python file `file` could run code of its own: calls of exec, eval, compile or
    __import__, imports of subprocess, multiprocessing, ctypes, runpy ..., and os.system /
    fork / exec* / spawn* / Popen ("utils.py:12 exec"). A file that cannot be read counts as
    one that could."""
    import dis
    from pathlib import Path

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
            if (
                (ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and name in _RUNNING_GLOBALS)
                or (ins.opname == "IMPORT_NAME" and name.split(".")[0] in _RUNNING_MODULES)
                or (ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and name in _RUNNING_ATTRIBUTES)
            ):
                line = ins.positions.lineno if ins.positions else None
                found.append(f"{Path(file).name}:{line} {name}")
    return sorted(set(found))


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
        f"may run code itself ({', '.join(route.runs_code[:5])}), so assay cannot show that "
        "every model-written program goes to its sandbox: treat them as running"
        if route.runs_code
        else "runs model-written code its own way, not through code_eval, so"
    )
    return (
        f"assay: task {name}: its own Python ({files}) {how} in this process and NOT in the "
        "sandbox: nothing is isolated (network, your files, your environment and keys, "
        "memory, processes). --confirm-run-unsafe-code accepts that."
    )
