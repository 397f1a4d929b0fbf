"""`assay validate`: check task definitions and their data without a model."""

from __future__ import annotations

import argparse
from typing import Any

from assay.settings import RunSettings
from assay.tasks.names import split_csv


def add_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add the `validate` command to the subcommands `sub`."""
    validate = sub.add_parser(
        "validate", help="check task definitions and their data without a model", parents=parents
    )
    validate.add_argument("--tasks", "-t", action="append", required=True)
    validate.add_argument("--include-path", action="append", default=[])
    validate.add_argument("--custom-tasks", action="append", default=[])
    validate.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Load every task's data and build its first doc; print one line per task."""
    from assay.evaluator import Evaluation
    from assay.tasks.registry import Registry

    evaluation = Evaluation(
        Registry(args.include_path, args.custom_tasks).resolve(split_csv(args.tasks)),
        RunSettings(),
    )
    evaluation.load_data()
    for task in evaluation.tasks:
        first = task.first_doc()
        print(
            f"ok  {task.name}: {len(task.eval_rows())} docs, output {task.output_type.value}, first doc {'renders' if first else 'skipped'}"
        )
    return 0
