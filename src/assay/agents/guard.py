"""A guard around Python-function tools that run in the evaluating process.

Such a tool is the task author's code, but the model chooses its arguments: a tool that
writes files, opens connections or starts programs could be steered into doing so where the
model likes. While one runs, an audit hook (PEP 578) refuses those operations in the thread
that runs it, and the call fails with a message naming the fix: declare the tool
`sandbox: true` (`function_tool(..., sandbox=True)`), which runs it in assay's sandbox like
model-written code. Reading files stays allowed (a tool may read its own data; imports read
files too). An audit hook is not a sandbox (ctypes gets past it): it keeps an honest tool from
doing harm by accident; the sandbox is what contains a tool.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_GUARDED: ContextVar[str | None] = ContextVar("assay_guarded_tool", default=None)
"""The name of the in-process tool running in this thread's context (None: none)."""

_REFUSED = {
    "socket.connect": "opens a network connection",
    "socket.bind": "opens a network socket",
    "socket.sendto": "sends over the network",
    "socket.getaddrinfo": "looks up a network address",
    "subprocess.Popen": "starts a program",
    "os.system": "starts a program",
    "os.exec": "starts a program",
    "os.posix_spawn": "starts a program",
    "os.spawn": "starts a program",
    "os.fork": "starts a process",
    "os.forkpty": "starts a process",
    "os.remove": "deletes a file",
    "os.rmdir": "deletes a folder",
    "os.rename": "moves a file",
    "os.mkdir": "creates a folder",
    "os.chmod": "changes a file's mode",
    "os.truncate": "truncates a file",
    "shutil.rmtree": "deletes a folder",
    "shutil.move": "moves a file",
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_installed = False


def _refusal(event: str, args: tuple[Any, ...]) -> str | None:
    """What the operation does, when the guard refuses it."""
    if event == "open":
        mode, flags = (args[1], args[2]) if len(args) >= 3 else (None, 0)
        writes = any(c in mode for c in "wax+") if isinstance(mode, str) else False
        if writes or (mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS):
            return f"writes the file {args[0]!r}"
        return None
    return _REFUSED.get(event)


def _hook(event: str, args: tuple[Any, ...]) -> None:
    tool = _GUARDED.get()
    if tool is None:
        return
    what = _refusal(event, args)
    if what is not None:
        raise PermissionError(
            f"tool {tool!r} {what}, which an in-process tool may not do; declare it "
            "'sandbox: true' (function_tool(..., sandbox=True)) to run it in assay's sandbox"
        )


@contextmanager
def guarded(tool: str) -> Iterator[None]:
    """Run the body as tool `tool`: its writes, connections and programs are refused."""
    global _installed
    if not _installed:
        sys.addaudithook(_hook)  # once per process; inert outside `guarded`
        _installed = True
    token = _GUARDED.set(tool)
    try:
        yield
    finally:
        _GUARDED.reset(token)
