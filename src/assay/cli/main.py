"""The `assay` command: run, tasks (list / show / dump), validate, compare, power, report;
one module per command.

Imports stay light here: heavy libraries load only when a command needs them, so
`assay --help` is instant.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from assay import __version__
from assay.cli import compare, power, report, run, tasks, validate
from assay.cli._argv import hide_secrets_in_command_line
from assay.cli._parser import Parser, common_flags
from assay.errors import AssayError
from assay.util.disk import DiskFull, disk_full_cause
from assay.util.redact import clean_text
from assay.util.terminal import TerminalSafeFormatter, terminal_safe


def build_parser() -> argparse.ArgumentParser:
    """The `assay` parser with every command."""
    return _build()[0]


def _build() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The `assay` parser, and the `run` command's (which --config fills)."""
    common = common_flags()
    parser = Parser(
        prog="assay", description="Evaluate language models on benchmark tasks.", parents=[common]
    )
    parser.add_argument("--version", action="version", version=f"assay {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    run_parser = run.add_parser(sub, [common])
    for command in (tasks, validate, compare, power, report):
        command.add_parser(sub, [common])
    return parser, run_parser


_NOT_RUN = frozenset({"-h", "--help", "--version"})


def _with_command(argv: Sequence[str] | None, commands: Sequence[str]) -> list[str]:
    """`argv`, with `run` put first when it starts with a flag other than help or version
    (lm-eval's `lm_eval --model hf ...`), and a note saying so."""
    given = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in given if a not in ("-v", "--verbose")), None)
    if first is None or first in commands or not first.startswith("-") or first in _NOT_RUN:
        return given
    sys.stderr.write("assay: note: no command given; running `assay run` (as lm-eval does).\n")
    return ["run", *given]


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line, with `assay run --config FILE`'s flags as defaults under it."""
    parser, run_parser = _build()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    argv = _with_command(argv, list(commands.choices))
    args = parser.parse_args(argv)
    if args.command != "run":
        return args
    if args.config:
        given = args
        run_parser.set_defaults(**run.config_defaults(args.config, run_parser))
        args = parser.parse_args(argv)
        # A repeatable flag on the command line replaces the file's list instead of extending it.
        for action in run_parser._actions:
            if isinstance(action, argparse._AppendAction) and getattr(given, action.dest):
                setattr(args, action.dest, getattr(given, action.dest))
    if not args.tasks:
        run_parser.error("the following arguments are required: --tasks/-t (or tasks: in --config)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `assay` command."""
    try:
        args = _parse(argv)
    except AssayError as exc:
        sys.stderr.write(f"assay: error: {terminal_safe(str(exc))}\n")
        return exc.exit_code
    if argv is None:  # this process's own command line: no other process may read its secrets
        hide_secrets_in_command_line()
    handler = logging.StreamHandler()
    # Task names and values from files reach log records: escapes print as text.
    handler.setFormatter(TerminalSafeFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(
        level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
        handlers=[handler],
    )
    # datasets and huggingface_hub print their records through handlers of their own;
    # propagating them too would print every message twice.
    for library in ("datasets", "huggingface_hub"):
        logging.getLogger(library).propagate = False
    try:
        return int(args.handler(args))
    except AssayError as exc:
        sys.stderr.write(f"assay: error: {terminal_safe(clean_text(str(exc)))}\n")
        return exc.exit_code
    except BrokenPipeError:
        # `assay tasks list | head`: the reader left; print nothing more, and no traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        sys.stderr.write(f"assay: interrupted; {_kept_message()}\n")
        return 130
    except Exception as exc:
        full = disk_full_cause(exc)
        if full is None:
            raise
        error = DiskFull(getattr(full, "filename", None) or "the run's files", full)
        sys.stderr.write(f"assay: error: {terminal_safe(clean_text(str(error)))}\n")
        return error.exit_code


def _kept_message() -> str:
    """What an interrupt kept: the results this process filed in a response cache."""
    from assay.requests.cache import kept_results

    kept = kept_results()
    if kept is None:
        return "no response cache was open, so nothing computed is kept."
    return (
        f"{kept} result(s) computed by this run are kept in the response cache; a re-run "
        "asks only for the rest."
    )


if __name__ == "__main__":
    raise SystemExit(main())
