"""The argument parser every `assay` command builds on: errors exit 2 with one line, and the
flags every command takes (-v) work before or after the command name."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error and exit code 2, taking lm-eval's underscore spellings
    of its flags (`--model_args`, `--batch_size`, ...) as the dashed ones."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args([self._dashed(a) for a in given], namespace)

    def _dashed(self, arg: str) -> str:
        """`--model_args` as `--model-args` when that is one of this parser's flags."""
        if not arg.startswith("--") or "_" not in arg:
            return arg
        flag, sep, value = arg.partition("=")
        dashed = flag.replace("_", "-")
        return dashed + sep + value if dashed in self._option_string_actions else arg

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
