"""A guard around Python-function tools that run in the evaluating process.

Such a tool is the task author's code, but the model chooses its arguments: a tool that
writes files, opens connections or starts programs could be steered into doing so where the
model likes. While one runs, an audit hook (PEP 578) refuses those operations in the thread
that runs it and in any thread it starts (threads running before it are the harness's own and
are left alone), and the call fails with a message naming the fix: declare the tool
`sandbox: true` (`function_tool(..., sandbox=True)`), which runs it in assay's sandbox like
model-written code. Reading files stays allowed (a tool may read its own data; imports read
files too). An audit hook is not a sandbox (ctypes gets past it): it keeps an honest tool from
doing harm by accident; the sandbox is what contains a tool.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_tool: str | None = None
"""The in-process tool running now (None: none)."""
_exempt: frozenset[int] = frozenset()
"""Threads that were running when it started (the harness's own): never guarded."""
_tainted: dict[int, tuple[threading.Thread, str]] = {}
"""Threads a tool started that outlived its call, by thread id (with the thread itself, so a
later thread given the same id is not mistaken for one): guarded until they end."""

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
    "os.chown": "changes a file's owner",
    "os.link": "links a file",
    "os.symlink": "links a file",
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
    if _tool is None and not _tainted:
        return
    ident = threading.get_ident()
    tool = _tool if _tool is not None and ident not in _exempt else None
    started = _tainted.get(ident)
    if started is not None and started[0] is threading.current_thread():
        tool = started[1]
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
    """Run the body as tool `tool`: its writes, connections and programs are refused, in the
    calling thread and in any thread it starts (also once the call is over)."""
    global _installed, _tool, _exempt
    with _lock:
        if not _installed:
            sys.addaudithook(_hook)  # once per process; inert outside `guarded`
            _installed = True
        me = threading.get_ident()
        for ident, (thread, _) in list(_tainted.items()):
            if not thread.is_alive():
                del _tainted[ident]
        _exempt = frozenset(t.ident for t in threading.enumerate() if t.ident not in (None, me))
        _tool = tool
    try:
        yield
    finally:
        with _lock:
            for thread in threading.enumerate():
                if thread.ident is not None and thread.ident not in _exempt | {me}:
                    _tainted[thread.ident] = (thread, tool)
            _tool, _exempt = None, frozenset()
