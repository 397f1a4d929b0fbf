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


def settings_table() -> list[str]:
    """Each run setting with its flag, default and what it changes (assay.run.settings)."""
    from assay.run.settings import Effect, default, describe, setting_names

    out = [
        "## What each run setting changes",
        "",
        "Each `assay run` setting (an `evaluate()` keyword of the same name) is declared once, with",
        "what it changes; that decides whether results.json records it under",
        "`provenance.settings` and whether it is part of the run's identity (an output folder",
        "resumes only the same run, see [Reliability](reliability.md)).",
        "",
    ]
    out += [f"- **{effect.value}**: {effect.meaning}." for effect in Effect]
    out += ["", "| setting | flag | default | changes |", "| --- | --- | --- | --- |"]
    for name in setting_names():
        spec = describe(name)
        flag = ", ".join(f"`{f}`" for f in spec.flag.names) if spec.flag else "(Python only)"
        value = default(name)
        shown = f"`{value!r}`" if not isinstance(value, tuple) else f"`{','.join(map(str, value))}`"
        out.append(f"| `{name}` | {flag} | {shown} | {spec.effect.value} |")
    return [*out, ""]


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
    return "\n".join(head + body + settings_table()).rstrip() + "\n"


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
