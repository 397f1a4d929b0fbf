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
            p.add_argument(
                "--apply-chat-template",
                action="store_true",
                help="render with the chat template of --model-args tokenizer=...",
            )
            p.add_argument("--system-instruction", default=None, help="system prompt, as in run")
            p.add_argument(
                "--fewshot-as-multiturn",
                action="store_true",
                default=None,
                help="few-shot examples as chat turns",
            )
            p.add_argument(
                "--model-args",
                default="",
                help="tokenizer=DIR_OR_ID (or pretrained=...): whose chat template renders",
            )
    tasks.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Print the listing, the shown task or the dump."""
    from assay.cli import task_listing as listing
    from assay.models.args import parse_kv
    from assay.tasks.registry import Registry

    registry = Registry(args.include_path, args.custom_tasks)
    if args.tasks_command == "list":
        print(listing.list_table(registry, args.pattern))
    elif args.tasks_command == "show":
        model_args = parse_kv(args.model_args, "--model-args")
        settings = listing.ShowSettings(
            num_fewshot=args.num_fewshot,
            apply_chat_template=args.apply_chat_template,
            system_instruction=args.system_instruction,
            fewshot_as_multiturn=args.fewshot_as_multiturn,
            tokenizer=model_args.get("tokenizer") or model_args.get("pretrained"),
        )
        print(listing.show(registry, args.name, settings))
    else:
        errors: list[str] = []
        print(listing.dump(registry, errors))
        if errors:
            for error in errors:
                sys.stderr.write(f"assay: tasks dump: {error}\n")
            sys.stderr.write(f"assay: tasks dump: {len(errors)} task file(s) did not load.\n")
            return 1
    return 0
