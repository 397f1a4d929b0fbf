"""`assay compare`: paired comparisons of run folders. Parsing and printing only: the work is
in results/compare.py and stats/."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from assay.errors import ConfigError
from assay.util.terminal import terminal_safe


def confidence_level(text: str) -> float:
    """An argparse type: a number strictly between 0 and 1 (a confidence level, a power)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError("must be between 0 and 1, e.g. 0.95")
    return value


def _at_least_two(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 2:
        raise argparse.ArgumentTypeError("must be >= 2")
    return value


def add_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add the `compare` command to the subcommands `sub`."""
    compare = sub.add_parser(
        "compare",
        parents=parents,
        help="paired comparison of runs (assay or lm-eval output folders written with samples)",
        description="Compare runs doc by doc: paired differences with standard errors, "
        "intervals, p-values (Holm-adjusted over all rows), McNemar's exact test and the "
        "minimum detectable effect. Rows marked * are significant.",
    )
    compare.add_argument(
        "runs", nargs="+", metavar="RUN", help="output folder (or results file) of a run"
    )
    compare.add_argument(
        "--baseline",
        default=None,
        metavar="RUN",
        help="compare each run against this one (a RUN given, by path or label, or another "
        "folder) instead of every pair",
    )
    compare.add_argument(
        "--labels", default=None, help="names of the RUNs in the tables, comma separated"
    )
    compare.add_argument(
        "--cluster-by",
        action="append",
        default=[],
        metavar="FIELD|TASK=FIELD",
        help="cluster docs by a field of the sample's doc (every task, or one task); "
        "default: the cluster key the task declared",
    )
    compare.add_argument(
        "--confidence", type=confidence_level, default=0.95, help="interval level (default 0.95)"
    )
    compare.add_argument(
        "--allow-prompt-mismatch",
        action="store_true",
        help="compare docs whose prompts differ (flagged) instead of refusing",
    )
    compare.add_argument("--markdown", action="store_true", help="print the table as markdown")
    compare.add_argument("--json", default=None, metavar="FILE", help="write the rows as JSON")
    compare.add_argument(
        "--bootstrap-iters",
        type=_at_least_two,
        default=1000,
        help="paired bootstrap replicates for corpus-level metrics (default 1000)",
    )
    compare.add_argument(
        "--seed", type=int, default=1234, help="seed of the paired bootstrap (default 1234)"
    )
    compare.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Compare the runs; print the table and notes, write --json."""
    from assay.results.compare import CompareOptions, compare
    from assay.results.compare_table import render_markdown, render_text

    labels = [s.strip() for s in args.labels.split(",")] if args.labels else None
    options = CompareOptions(
        confidence=args.confidence,
        cluster_by=cluster_by_option(args.cluster_by),
        allow_prompt_mismatch=args.allow_prompt_mismatch,
        bootstrap_iters=args.bootstrap_iters,
        seed=args.seed,
    )
    report = compare(*args.runs, baseline=args.baseline, labels=labels, options=options)
    if not report.comparisons:
        # An empty table with exit 0 would read as "no differences".
        skipped = [why for pair in report.pairs for why in pair.skipped]
        if skipped:
            raise ConfigError(
                f"assay compare {' '.join(args.runs)}: nothing could be compared: "
                + "; ".join(skipped[:5])
                + (f"; and {len(skipped) - 5} more" if len(skipped) > 5 else "")
                + "."
            )
        raise ConfigError(
            f"assay compare {' '.join(args.runs)}: the runs share no task, metric and filter "
            "with per-doc values on common docs, so nothing could be compared. Give runs of "
            "the same tasks scored with the same metrics."
        )
    table = render_markdown(report) if args.markdown else render_text(report)
    print(terminal_safe(table), end="")
    if args.json:
        path = Path(args.json)
        try:
            path.write_text(
                json.dumps(report.as_json(), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
            )
        except OSError as exc:
            raise ConfigError(f"--json {path}: cannot write ({exc.strerror}).") from None
        print(f"\ncomparisons written to {path}")
    return 0


def cluster_by_option(values: list[str]) -> dict[str, str]:
    """--cluster-by FIELD (every task) or TASK=FIELD."""
    out: dict[str, str] = {}
    for value in values:
        task, sep, field = value.partition("=")
        if sep and (not task.strip() or not field.strip()):
            raise ConfigError(f"--cluster-by {value!r}: expected FIELD or TASK=FIELD.")
        key, name = (task.strip(), field.strip()) if sep else ("*", value.strip())
        if not name:
            raise ConfigError("--cluster-by: give a doc field, e.g. --cluster-by passage_id.")
        out[key] = name
    return out
