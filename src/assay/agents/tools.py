"""The tools an agent task offers: Python functions run in-process (guarded: `agents.guard`
refuses their writes, connections and programs), and Python functions declared `sandbox`,
programs and commands, which run in assay's sandbox (`assay.sandbox`, the run's --sandbox mode)
like model-written code.

A tool's answer is text (what the model reads back). A tool that fails (unknown name,
arguments that did not parse or do not fit, an exception, a sandboxed program that failed) is
answered with an `error: ...` text and recorded as an error: the model may try again.
"""

from __future__ import annotations

import inspect
import json
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from assay.errors import TaskConfigError
from assay.requests.tools import ToolCall, ToolSpec

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array",
               dict: "object"}  # fmt: skip
MAX_RESULT_CHARS = 20_000
"""A tool result longer than this is cut (and says so): a tool that floods its output must
not flood every later turn's prompt."""
STATE_PARAMETER = "state"
"""A function tool that takes a parameter of this name gets the sample's state (a dict the
tools change and `end_state` scores), never shown to the model."""


@dataclass(frozen=True)
class ToolOutcome:
    """What one call gave back: the text the model reads, whether it failed, and how long it
    took."""

    content: str
    error: bool
    seconds: float


@dataclass(frozen=True)
class AgentTool:
    """One tool: its spec (what the model sees) and how a call is run."""

    spec: ToolSpec
    run: Callable[[dict[str, Any], dict[str, Any]], str]
    """(arguments, sample state) -> result text; raising means the call failed."""
    sandboxed: bool = False
    """Runs in the sandbox: the task needs --confirm-run-unsafe-code."""

    def call(self, call: ToolCall, state: dict[str, Any]) -> ToolOutcome:
        """Run `call` (made to this tool) on the sample's `state`."""
        started = time.perf_counter()
        arguments = call.arguments
        if arguments is None:
            return ToolOutcome(
                f"error: the arguments are not a JSON object: {call.raw!r}", True, 0.0
            )
        try:
            content = self.run(arguments, state)
        except Exception as exc:  # the tool's failure is the model's answer, not the run's
            return ToolOutcome(
                f"error: {type(exc).__name__}: {exc}", True, time.perf_counter() - started
            )
        if len(content) > MAX_RESULT_CHARS:
            cut = len(content) - MAX_RESULT_CHARS
            content = content[:MAX_RESULT_CHARS] + f"\n[... {cut} more characters cut]"
        return ToolOutcome(content, False, time.perf_counter() - started)


def function_tool(
    function: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    sandbox: bool = False,
    timeout_s: float = 10.0,
) -> AgentTool:
    """A Python function as a tool, called with the model's arguments as keyword arguments
    (and the sample's state as `state` when it takes one). Its name, description (the
    docstring's first paragraph) and parameters (from the signature's annotations; those
    without a default are required) are read from the function unless given.

    In-process (the default), its file writes, network connections and programs are refused
    (`agents.guard`), and a call that runs past `timeout_s` is interrupted and answered with
    an error (on the main thread, where the loop runs). With `sandbox=True` it runs in the run's sandbox instead, like
    model-written code: its module's source is run there (standard library imports only in
    the bwrap mode), the state goes in and comes back as JSON, and the task needs
    --confirm-run-unsafe-code."""
    signature = inspect.signature(function)
    takes_state = STATE_PARAMETER in signature.parameters
    schema = dict(parameters) if parameters is not None else _schema_of(signature)
    doc = inspect.getdoc(function) or ""
    spec = ToolSpec.of(
        name or function.__name__,
        description if description is not None else doc.split("\n\n")[0].strip(),
        schema,
    )
    if sandbox:
        return AgentTool(spec, _sandboxed_function(function, takes_state, timeout_s), True)

    def run(arguments: dict[str, Any], state: dict[str, Any]) -> str:
        from assay.agents.guard import guarded

        extra = {STATE_PARAMETER: state} if takes_state else {}
        with guarded(spec.name), _deadline(spec.name, timeout_s):
            return _as_text(function(**arguments, **extra))

    return AgentTool(spec, run)


class ToolTimeout(Exception):
    """An in-process tool ran past its `timeout_s` (answered to the model as an error)."""


@contextmanager
def _deadline(name: str, seconds: float) -> Iterator[None]:
    """Interrupt the block after `seconds` (SIGALRM: the main thread only; elsewhere the
    block runs unbounded), so that a tool that hangs answers with an error instead of
    holding the run."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise ToolTimeout(f"the tool {name!r} ran past its timeout_s of {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _sandboxed_function(
    function: Callable[..., Any], takes_state: bool, timeout_s: float
) -> Callable[[dict[str, Any], dict[str, Any]], str]:
    """How a `sandbox=True` function tool is run: its module's source and the call, as one
    program in the sandbox; the result and the new state come back after a fresh nonce (what
    the function prints cannot pass for them)."""
    module = sys.modules.get(function.__module__)
    where = f"tool function {function.__module__}.{function.__qualname__}"
    if function.__qualname__ != function.__name__ or module is None:
        raise TaskConfigError(
            f"{where}: a sandboxed function tool must be a module's top-level function."
        )
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        raise TaskConfigError(
            f"{where}: its module's source cannot be read, so it cannot run in the sandbox."
        ) from None
    path = getattr(module, "__file__", None) or "<tool>"

    def run(arguments: dict[str, Any], state: dict[str, Any]) -> str:
        nonce = secrets.token_hex(16)
        state_argument = f", {STATE_PARAMETER}=_state" if takes_state else ""
        program = (
            "import json as _json, sys as _sys\n"
            f"_module = {{'__name__': {function.__module__!r}, '__file__': {path!r}}}\n"
            f"exec(compile({source!r}, {path!r}, 'exec'), _module)\n"
            f"_state = _json.loads({json.dumps(state)!r})\n"
            f"_value = _module[{function.__name__!r}](**_json.loads({json.dumps(arguments)!r}){state_argument})\n"
            "_text = _value if isinstance(_value, str) else _json.dumps(_value, ensure_ascii=False, default=str)\n"
            f"_sys.stdout.write('\\n' + {nonce!r} + _json.dumps({{'text': _text, 'state': _state}}))\n"
        )
        out = _in_sandbox(program, timeout_s)
        _, marker, answer = out.rpartition(nonce)
        if not marker:
            raise RuntimeError(
                "the tool's answer did not come back from the sandbox (its output was cut?)"
            )
        value = json.loads(answer)
        state.clear()
        state.update(value["state"])
        text: str = value["text"]
        return text

    return run


def _schema_of(signature: inspect.Signature) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in signature.parameters.values():
        if parameter.name == STATE_PARAMETER or parameter.kind in (
            parameter.VAR_POSITIONAL,
            parameter.VAR_KEYWORD,
        ):
            continue
        kind = _JSON_TYPES.get(parameter.annotation)
        if kind is None and isinstance(parameter.annotation, str):
            kind = {t.__name__: v for t, v in _JSON_TYPES.items()}.get(parameter.annotation)
        properties[parameter.name] = {"type": kind} if kind else {}
        if parameter.default is parameter.empty:
            required.append(parameter.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def sandboxed_tool(
    name: str,
    code: str,
    *,
    description: str = "",
    parameters: Mapping[str, Any] | None = None,
    timeout_s: float = 10.0,
) -> AgentTool:
    """A tool whose work is Python `code` defining `run(**arguments)`, executed in the run's
    sandbox (a fresh interpreter, no network, a private /tmp in bwrap mode): what it returns
    (or prints, when it returns None) is the result; a failure is the program's stderr tail."""

    def run(arguments: dict[str, Any], state: dict[str, Any]) -> str:
        program = (
            f"{code}\n\nimport json as _json\n"
            f"_value = run(**_json.loads({json.dumps(json.dumps(arguments))}))\n"
            "if _value is not None:\n"
            "    print(_value if isinstance(_value, str) else _json.dumps(_value), end='')\n"
        )
        return _in_sandbox(program, timeout_s)

    schema = dict(parameters) if parameters is not None else {"type": "object", "properties": {}}
    return AgentTool(ToolSpec.of(name, description, schema), run, sandboxed=True)


def command_tool(
    name: str,
    argv: list[str],
    *,
    description: str = "",
    parameters: Mapping[str, Any] | None = None,
    timeout_s: float = 10.0,
) -> AgentTool:
    """A tool that runs a command in the run's sandbox: each word of `argv` may name the
    call's arguments as `{name}`; the result is the command's standard output (a non-zero
    exit fails the call with its standard error)."""

    def run(arguments: dict[str, Any], state: dict[str, Any]) -> str:
        try:
            words = [word.format(**arguments) for word in argv]
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"the command needs argument {exc}") from None
        program = (
            "import subprocess, sys\n"
            f"done = subprocess.run({words!r}, capture_output=True, text=True)\n"
            "sys.stdout.write(done.stdout)\n"
            "sys.stderr.write(done.stderr)\n"
            # A zero exit returns normally: the sandbox counts sys.exit(0) as a program that
            # never finished.
            "if done.returncode:\n"
            "    sys.exit(done.returncode)\n"
        )
        return _in_sandbox(program, timeout_s)

    schema = dict(parameters) if parameters is not None else {"type": "object", "properties": {}}
    return AgentTool(ToolSpec.of(name, description, schema), run, sandboxed=True)


def _in_sandbox(program: str, timeout_s: float) -> str:
    from assay.sandbox import Limits, run_many

    (result,) = run_many([program], Limits(timeout_s=timeout_s))
    if not result.passed:
        detail = result.detail or result.stderr.strip()[-300:]
        raise RuntimeError(f"{result.outcome} in the {result.mode} sandbox: {detail}")
    return result.stdout
