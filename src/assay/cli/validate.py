"""`assay validate`: check task definitions and their data without a model."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from assay.errors import AssayError
from assay.run.settings import RunSettings
from assay.tasks.names import split_csv

if TYPE_CHECKING:
    from assay.tasks.registry import Registry


def add_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add the `validate` command to the subcommands `sub`."""
    validate = sub.add_parser(
        "validate", help="check task definitions and their data without a model", parents=parents
    )
    validate.add_argument(
        "--tasks",
        "-t",
        action="append",
        help="names to check (with --no-data: default every name under --include-path)",
    )
    validate.add_argument("--include-path", action="append", default=[])
    validate.add_argument("--custom-tasks", action="append", default=[])
    validate.add_argument(
        "--no-data",
        action="store_true",
        help="check definitions only (config, includes, !function, templates, filters, metrics, "
        "groups, tags); load no dataset; report every failure",
    )
    validate.add_argument(
        "--json", metavar="FILE", help="with --no-data: write every verdict to FILE as JSON"
    )
    validate.add_argument(
        "--confirm-run-unsafe-code",
        action="store_true",
        help="import the Python of tasks that declare unsafe_code (its top level runs in this "
        "process; without the flag such a task is reported as failed, its Python not imported), "
        "and let any task's own Python run code of its own as it loads (a process, exec of a "
        "string), after a notice, as `assay run --confirm-run-unsafe-code` does",
    )
    validate.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Load every task's data and build its first doc; print one line per task."""
    from assay.run.evaluation import Evaluation
    from assay.tasks.runtime_guard import start_run

    start_run(args.confirm_run_unsafe_code)  # before any task file is imported, as `assay run`
    if args.no_data:
        return _definitions(args)
    if args.json:
        raise AssayError("validate: --json goes with --no-data (the definitions check).")
    if not args.tasks:
        raise AssayError(
            "validate: name the tasks to load with --tasks, or check every definition under "
            "--include-path without data with --no-data."
        )
    evaluation = Evaluation(
        _registry(args).resolve(split_csv(args.tasks)),
        RunSettings(confirm_run_unsafe_code=args.confirm_run_unsafe_code),
    )
    evaluation.load_data()
    for task in evaluation.tasks:
        first = task.first_doc()
        print(
            f"ok  {task.name}: {len(task.eval_rows())} docs, output {task.output_type.value}, first doc {'renders' if first else 'skipped'}"
        )
    return 0


def _definitions(args: argparse.Namespace) -> int:
    """`validate --no-data`: one line per name, a summary, exit 1 when anything fails."""
    import json

    from assay.run.validate import Validator

    if not args.tasks and not args.include_path:
        raise AssayError("validate --no-data: give --tasks, or --include-path to check all of it.")
    registry = _registry(args)
    checks = Validator(registry).run(split_csv(args.tasks) if args.tasks else None)
    for check in checks:
        label = check.name if check.name is not None else check.file
        line = f"{'ok  ' if check.ok else 'FAIL'} {check.kind:<5} {label}"
        print(line if check.ok else f"{line}: {check.error}")
    failed = [c for c in checks if not c.ok]
    counts = ", ".join(
        f"{sum(c.ok for c in checks if c.kind == k)}/{sum(c.kind == k for c in checks)} {k}s"
        for k in ("task", "group", "tag", "file")
        if any(c.kind == k for c in checks)
    )
    print(f"{len(checks) - len(failed)} of {len(checks)} valid ({counts}).")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"entries": [c.as_json() for c in checks]}, fh, indent=1)
    return 1 if failed else 0


def _registry(args: argparse.Namespace) -> Registry:
    """The named tasks; one that declares unsafe_code has its Python imported only with
    --confirm-run-unsafe-code."""
    from assay.tasks.registry import Registry

    consent = bool(args.confirm_run_unsafe_code)
    return Registry(args.include_path, args.custom_tasks, confirm_run_unsafe_code=consent)
