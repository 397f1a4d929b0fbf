"""Text made safe for a terminal: names from task files and results never steer it.

A task name, label or value read from a file may hold ANSI/OSC escape sequences (colours,
cursor moves, window titles, hyperlinks) or bidirectional overrides that make printed text
read differently from what it is. `terminal_safe` writes every such character as a visible
escape (`\\x1b`, `\\u202e`), leaving line breaks and tabs as they are.
"""

from __future__ import annotations

import logging

from assay.util.redact import clean_text

_BIDI = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))
"""Bidirectional embeddings, overrides and isolates."""

_ESCAPED = {
    **{code: f"\\x{code:02x}" for code in (*range(0x00, 0x20), *range(0x7F, 0xA0))},
    **{code: f"\\u{code:04x}" for code in _BIDI},
}
del _ESCAPED[ord("\n")], _ESCAPED[ord("\t")]


def terminal_safe(text: str) -> str:
    """`text` with control characters (C0 but line breaks and tabs, DEL, C1) and
    bidirectional overrides written as visible escapes."""
    return text.translate(_ESCAPED)


class TerminalSafeFormatter(logging.Formatter):
    """A log formatter whose records reach the terminal through `terminal_safe`."""

    def format(self, record: logging.LogRecord) -> str:
        return terminal_safe(clean_text(super().format(record)))


__all__ = ["TerminalSafeFormatter", "terminal_safe"]
