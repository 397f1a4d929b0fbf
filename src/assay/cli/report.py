"""`assay report`: runs as one self-contained HTML page. Parsing only: the page is built in
results/report.py."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from assay.cli.compare import cluster_by_option, confidence_level
from assay.errors import ConfigError


def add_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Add the `report` command to the subcommands `sub`."""
    report = sub.add_parser(
        "report",
        parents=parents,
        help="one self-contained HTML page of runs: summary, paired comparison, plots, samples",
        description="Write an HTML report of one or more runs (assay or lm-eval output "
        "folders). It opens offline: plots, data and the sample browser are inside the file.",
    )
    report.add_argument("runs", nargs="+", metavar="RUN", help="output folder (or results file)")
    report.add_argument(
        "-o", "--output", default="report.html", help="the HTML file to write (default report.html)"
    )
    report.add_argument(
        "--labels", default=None, help="names of the RUNs in the report, comma separated"
    )
    report.add_argument(
        "--cluster-by",
        action="append",
        default=[],
        metavar="FIELD|TASK=FIELD",
        help="cluster docs by a field of the sample's doc in the comparison (as assay compare)",
    )
    report.add_argument(
        "--confidence", type=confidence_level, default=0.95, help="interval level (default 0.95)"
    )
    report.add_argument(
        "--allow-prompt-mismatch",
        action="store_true",
        help="compare docs whose prompts differ (flagged) instead of refusing",
    )
    report.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    """Build the page and write it."""
    from assay.results.compare import CompareOptions, read_runs
    from assay.results.report import build_report

    labels = [s.strip() for s in args.labels.split(",")] if args.labels else None
    runs = read_runs(args.runs, labels)
    options = CompareOptions(
        confidence=args.confidence,
        cluster_by=cluster_by_option(args.cluster_by),
        allow_prompt_mismatch=args.allow_prompt_mismatch,
    )
    page = build_report(runs, options)
    path = Path(args.output)
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--output {path}: cannot write ({exc.strerror}).") from None
    print(f"report written to {path} ({path.stat().st_size / 1e6:.2f} MB)")
    return 0
