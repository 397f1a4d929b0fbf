"""`assay tasks list / show / dump`: what the registry holds, without loading any model."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from assay.cli._parser import Parser


def add_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add the `tasks` command (list, show, dump) to the subcommands `sub`."""
    tasks = sub.add_parser("tasks", help="list, show or dump tasks", parents=parents)
    tasks_sub = tasks.add_subparsers(dest="tasks_command", required=True, parser_class=Parser)
    for name, helptext in (
        ("list", "list tasks, groups and tags (tasks with output type and default shots)"),
        ("show", "show one task's config and a rendered prompt"),
        ("dump", "JSON of task modules and --include-path YAML files, with their configs"),
    ):
        p = tasks_sub.add_parser(name, help=helptext, parents=parents)
        p.add_argument("--include-path", action="append", default=[])
        p.add_argument("--custom-tasks", action="append", default=[])
        if name == "list":
            p.add_argument(
                "pattern", nargs="?", default=None, help="only names containing this text"
            )
        if name == "show":
            p.add_argument("name")
            p.add_argument("--num-fewshot", type=int, default=None)
    tasks.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Print the listing, the shown task or the dump."""
    from assay.tasks import listing
    from assay.tasks.registry import Registry

    registry = Registry(args.include_path, args.custom_tasks)
    if args.tasks_command == "list":
        print(listing.list_table(registry, args.pattern))
    elif args.tasks_command == "show":
        print(listing.show(registry, args.name, args.num_fewshot))
    else:
        errors: list[str] = []
        print(listing.dump(registry, errors))
        if errors:
            for error in errors:
                sys.stderr.write(f"assay: tasks dump: {error}\n")
            sys.stderr.write(f"assay: tasks dump: {len(errors)} task file(s) did not load.\n")
            return 1
    return 0
