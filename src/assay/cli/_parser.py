"""The argument parser every `assay` command builds on: errors exit 2 with one line, and the
flags every command takes (-v) work before or after the command name."""

from __future__ import annotations

import argparse
import sys


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"assay: error: {message}\n")
        raise SystemExit(2)


def common_flags() -> argparse.ArgumentParser:
    """Flags of every command, as a parent parser. SUPPRESS keeps a subcommand's parser from
    resetting a flag given before the command name (`assay -v run` and `assay run -v`)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="log progress details",
    )
    return parent
