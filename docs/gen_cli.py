"""Write docs/cli.md, the CLI reference, from `assay`'s own argument parser.

    .venv/bin/python docs/gen_cli.py          # rewrite docs/cli.md
    .venv/bin/python docs/gen_cli.py --check  # exit 1 if docs/cli.md is stale

tests/test_docs_cli.py fails when the committed page differs from what this script writes.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parent / "cli.md"
WIDTH = "100"  # argparse wraps help to $COLUMNS: fixed, so the page does not depend on a terminal


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser's subcommands by name, in the order they were added (aliases left out)."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if sub not in found.values():
                    found[name] = sub
    return found


def sections(parser: argparse.ArgumentParser, title: str, level: int) -> list[str]:
    """The help of `parser` under a heading, then each of its subcommands' below it."""
    out = [f"{'#' * level} `{title}`", "", "```text", parser.format_help().rstrip(), "```", ""]
    for name, sub in subcommands(parser).items():
        out += sections(sub, f"{title} {name}", min(level + 1, 4))
    return out


def render() -> str:
    """The whole page."""
    from assay.cli.main import build_parser

    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        body = sections(build_parser(), "assay", 2)
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before

    head = [
        "# CLI reference",
        "",
        "Every `assay` command with its flags, as `--help` prints them. Generated from the",
        "argument parser by `docs/gen_cli.py`; do not edit by hand. The guides explain the flags",
        "in context: [Running evaluations](running.md), [Comparing runs](comparing-runs.md),",
        "[Reports](reports.md).",
        "",
    ]
    return "\n".join(head + body).rstrip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/cli.md is stale")
    args = parser.parse_args()
    page = render()
    if args.check:
        stale = not PAGE.exists() or PAGE.read_text(encoding="utf-8") != page
        if stale:
            print(f"{PAGE} is stale: run python docs/gen_cli.py", file=sys.stderr)
        return int(stale)
    PAGE.write_text(page, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
