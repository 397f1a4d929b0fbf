"""The `assay` command: run, tasks (list / show / dump), validate; one module per command.

Imports stay light here: heavy libraries load only when a command needs them, so
`assay --help` is instant.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from assay.cli import run, tasks, validate
from assay.cli._parser import Parser, common_flags
from assay.errors import AssayError


def build_parser() -> argparse.ArgumentParser:
    """The `assay` parser with every command."""
    common = common_flags()
    parser = Parser(
        prog="assay", description="Evaluate language models on benchmark tasks.", parents=[common]
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in (run, tasks, validate):
        command.add_parser(sub, [common])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `assay` command."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    # datasets and huggingface_hub print their records through handlers of their own;
    # propagating them too would print every message twice.
    for library in ("datasets", "huggingface_hub"):
        logging.getLogger(library).propagate = False
    try:
        return int(args.handler(args))
    except AssayError as exc:
        sys.stderr.write(f"assay: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("assay: interrupted; completed requests are kept in the response cache.\n")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
