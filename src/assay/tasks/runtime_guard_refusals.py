"""The runtime guard's refusals: how one is raised and recorded, and the message that names
the task, file, line, operation and fix."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from assay.tasks.runtime_guard_state import (
    FRAME_EVENTS,
    GC_EVENTS,
    PROCESS_EVENTS,
    STATE,
    CodeRunRefused,
    GuardedTask,
)


def refuse(task: GuardedTask, event: str, args: tuple[Any, ...], frame: FrameType | None) -> None:
    """Raise (and record) the refusal of `event`; with the consent flag, say so once instead.
    Its message hides secrets as every output does (a command may hold a key)."""
    from assay.util.redact import clean_text

    refusal = CodeRunRefused(clean_text(_message(task, event, args, frame)))
    if task.confirmed:
        if not task.announced:
            task.announced = True
            print(f"assay: {refusal}", file=sys.stderr)
        return
    task.refusals.append(refusal)
    if STATE.at_exit is not None or threading.current_thread() is not threading.main_thread():
        print(f"assay: {refusal}", file=sys.stderr)  # the run reports it later, or never
    raise refusal


def first(task: GuardedTask) -> CodeRunRefused:
    """The task's first refusal, reported once (the list empties)."""
    first = task.refusals[0]
    task.refusals.clear()
    return first


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

    if event in PROCESS_EVENTS:
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
    if event in FRAME_EVENTS:
        return f"watch the interpreter's frames ({event})"
    if event in GC_EVENTS:
        return f"walk the object graph ({event})"
    if event == "atexit.register":
        return f"register an exit handler that runs code ({shown(args[0])})"
    return f"call into C with ctypes ({event})"


def mark_failed(path: Path, written: bytes, refusal: CodeRunRefused) -> bool:
    """Rewrite the results file `path` as a failed run's, as a refused run's is written:
    `assay.stopped_by` "error", and the refusal said under `assay.refused` (secrets hidden as
    in every output). Only while it still holds the bytes this run `written` (a run that
    wrote the folder since keeps its file)."""
    import json

    from assay.util.redact import clean_text

    try:
        if path.read_bytes() != written:
            return False
        data = json.loads(written)
        refused = clean_text(str(refusal))
        data["assay"] = {**data.get("assay", {}), "stopped_by": "error", "refused": refused}
        part = path.with_name(path.name + ".refused")
        part.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
        os.replace(part, path)
    except (OSError, ValueError, AttributeError):  # gone, or not ours to read: say so only
        return False
    return True
