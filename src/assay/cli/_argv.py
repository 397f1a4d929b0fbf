"""Hiding the secrets of assay's own command line from other processes of the user.

/proc/PID/cmdline is readable by every process on the machine, and a program run under
`--sandbox rlimits` or `none` is one of them: an `api_key=...` in `--model-args`, or a
`base_url` with `user:password@`, would be one `open()` away. Once the command line is parsed
(Python keeps its own copy, `sys.argv`), assay rewrites the kernel's copy, the strings the
process was started with, in place, with those values replaced by `***` (what setproctitle
does to set a process's title; the kernel reads /proc/PID/cmdline from that memory).
Linux only; elsewhere, or when the memory is not where /proc/self/stat says, nothing is done.
"""

from __future__ import annotations

from assay.util.redact import clean_text, redact_words

# /proc/PID/stat's fields arg_start and arg_end (numbered from 1, proc(5)); the list below
# starts after the command name, at field 3.
_ARG_START_FIELD = 48
_FIRST_FIELD_AFTER_NAME = 3


def hidden_command_line(words: list[bytes]) -> list[bytes]:
    """`words` (a process's command line) with secret values replaced, each no longer than
    it was (a cut placeholder still hides the value: it was never in it)."""
    texts = [w.decode("utf-8", errors="surrogateescape") for w in words]
    hidden = [clean_text(w) for w in redact_words(texts)]
    out = []
    for old, new in zip(words, hidden, strict=True):
        encoded = new.encode("utf-8", errors="surrogateescape")
        out.append(old if encoded == old else encoded[: len(old)])
    return out


def hide_secrets_in_command_line() -> bool:
    """Rewrite this process's /proc/self/cmdline without its secret values; whether anything
    was rewritten (False: nothing secret, not Linux, or the memory was not as expected)."""
    try:
        with open("/proc/self/cmdline", "rb") as handle:
            shown = handle.read()
        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except OSError:
        return False
    words = shown.split(b"\0")[:-1] if shown.endswith(b"\0") else shown.split(b"\0")
    hidden = hidden_command_line(words)
    if hidden == words:
        return False
    at = _ARG_START_FIELD - _FIRST_FIELD_AFTER_NAME
    if len(fields) <= at + 1:
        return False
    start, end = int(fields[at]), int(fields[at + 1])
    return _overwrite(start, end, shown, b"\0".join(hidden) + b"\0")


def _overwrite(start: int, end: int, expected: bytes, text: bytes) -> bool:
    """Write `text`, padded with NULs, over [start, end) when that memory holds `expected`."""
    import ctypes

    size = end - start
    if size != len(expected) or len(text) > size or ctypes.string_at(start, size) != expected:
        return False
    ctypes.memmove(start, text.ljust(size, b"\0"), size)
    return True
