"""lm-eval's `lm_eval run` flags that `assay run` has no flag of its own for.

Each is accepted and mapped to what assay does instead, with a one-line note saying so, or
refused with that note when assay has nothing that would honour it. lm-eval's flags that assay
spells the same way (`--model_args`, `--batch_size` ...) are plain `assay run` flags.

| lm-eval flag          | assay                                                          |
|-----------------------|----------------------------------------------------------------|
| `--use_cache PATH`    | `--cache PATH` (the response cache)                            |
| `--verbosity LEVEL`   | the log level (`-v` is INFO)                                   |
| `--trust_remote_code` | model arg `trust_remote_code=True`                             |
| `--write_out`         | nothing in the run: `assay tasks show TASK` prints prompts     |
| `--cache_requests`    | nothing: assay builds prompts as it streams, no request cache  |
| `--max_batch_size N`  | model arg `max_batch_size=N`                                   |
| `--batch_size auto:N` | `auto`: assay sizes every batch from free memory               |
| `--check_integrity`, `--wandb_args`, `--wandb_config_args`, `--trackio_args`, `--hf_hub_log_args` | refused, naming assay's way |
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from assay.errors import ConfigError

REFUSED = {
    "check_integrity": "assay has no task test suite to run; `assay validate --tasks NAME` "
    "checks a task's config and data (add --include-path DIR for your YAMLs)",
    "wandb_args": "log the run with --log-to wandb --log-to-args project=NAME,entity=NAME",
    "wandb_config_args": "log the run with --log-to wandb --log-to-args project=NAME",
    "trackio_args": "log the run with --log-to trackio --log-to-args project=NAME",
    "hf_hub_log_args": "push the run with --log-to hub --log-to-args repo=ORG/NAME",
}
"""lm-eval flags assay refuses, with what to use instead."""

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def add_flags(run: argparse.ArgumentParser) -> None:
    """Add lm-eval's flags to the `run` parser, in a group of their own."""
    group = run.add_argument_group(
        "lm-eval flags", "accepted with a note of what assay does instead (or refused so)"
    )
    group.add_argument("--use-cache", default=None, metavar="PATH", help="as --cache PATH")
    group.add_argument(
        "--verbosity", default=None, type=str.upper, metavar="LEVEL", help="log level"
    )
    group.add_argument(
        "--trust-remote-code",
        action="store_true",
        default=None,
        help="as --model-args trust_remote_code=True",
    )
    group.add_argument(
        "--write-out",
        "-w",
        action="store_true",
        default=None,
        help="prints nothing here: `assay tasks show TASK` prints a task's prompts",
    )
    group.add_argument(
        "--cache-requests",
        nargs="?",
        const="true",
        default=None,
        metavar="true|refresh|delete",
        help="no effect: assay builds prompts as it streams",
    )
    group.add_argument(
        "--max-batch-size",
        type=int,
        default=None,
        metavar="N",
        help="as --model-args max_batch_size=N",
    )
    for name in REFUSED:
        group.add_argument(
            "--" + name.replace("_", "-"),
            nargs="*",
            default=None,
            help=argparse.SUPPRESS,
        )


def apply_flags(args: argparse.Namespace) -> list[str]:
    """Map the lm-eval flags given in `args` onto assay's (in place); the notes to print.

    Refuses the flags assay cannot honour, naming what to use instead.
    """
    for name, instead in REFUSED.items():
        if getattr(args, name, None) is not None:
            raise ConfigError(f"--{name} is lm-eval's flag, not assay's: {instead}.")
    notes: list[str] = []
    if args.use_cache is not None:
        if args.cache not in (None, args.use_cache):
            raise ConfigError(
                f"--use_cache {args.use_cache} and --cache {args.cache} disagree; give one of them."
            )
        args.cache = args.use_cache
        notes.append(f"--use_cache {args.use_cache}: assay's response cache is --cache; using it.")
    if args.verbosity is not None:
        if args.verbosity not in LEVELS:
            raise ConfigError(
                f"--verbosity {args.verbosity}: give one of {', '.join(LEVELS)} (assay's -v is INFO)."
            )
        logging.getLogger().setLevel(args.verbosity)
        notes.append(f"--verbosity {args.verbosity}: the log level is set to it.")
    _to_model_arg(args, notes, "trust_remote_code", True if args.trust_remote_code else None)
    _to_model_arg(args, notes, "max_batch_size", args.max_batch_size)
    if args.write_out:
        notes.append(
            "--write_out: prints nothing during a run; `assay tasks show TASK` prints "
            "a task's prompts, targets and filters."
        )
    if args.cache_requests is not None:
        notes.append(
            f"--cache_requests {args.cache_requests}: no effect; assay builds prompts "
            "as it streams, with no request cache to keep."
        )
    if isinstance(args.batch_size, str) and args.batch_size.startswith("auto:"):
        from assay.run.settings import checked

        checked("batch_size", args.batch_size)  # a bad N is refused, not run as auto
        notes.append(
            f"--batch_size {args.batch_size}: assay's auto sizes every batch from free "
            "memory (lm-eval re-picks N times over the run); running with auto."
        )
        args.batch_size = "auto"
    return notes


def _to_model_arg(args: argparse.Namespace, notes: list[str], key: str, value: Any) -> None:
    """`--key value` as model arg key=value, refused when --model-args already says otherwise."""
    if value is None:
        return
    from assay.models.args import parse_kv

    flag = "--" + key
    given = parse_kv(args.model_args, "--model-args")
    if key in given and str(given[key]) != str(value):
        raise ConfigError(f"{flag} and --model-args {key}={given[key]} disagree; give one of them.")
    given[key] = value
    args.model_args = given
    notes.append(f"{flag}: passed to the backend as model arg {key}={value}.")


def print_notes(notes: list[str]) -> None:
    """One `assay: note:` line per note, on stderr."""
    for note in notes:
        sys.stderr.write(f"assay: note: {note}\n")
