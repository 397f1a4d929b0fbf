"""Progress tables: live in a terminal (rich), as HTML in notebooks, as Markdown anywhere.

One row per config: status, shards and rows done, each metric as ``value [lower, upper]``, the
knobs that differ between configs, and throughput. Knob values arrive already redacted.
"""

from __future__ import annotations

import html
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from assay.pipelines.shards.live_metrics import metric_cell

_HIDDEN_METRICS = {"Samples Processed"}


@dataclass(slots=True)
class ConfigRow:
    """What the table shows for one config."""

    config_id: int
    status: str
    shards_done: int
    num_shards: int
    n: int
    population: int
    errors: int
    seconds: float
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    knobs: dict[str, Any] = field(default_factory=dict)


def _varying_knobs(rows: Sequence[ConfigRow]) -> list[str]:
    keys: dict[str, None] = {}
    for row in rows:
        keys.update(dict.fromkeys(row.knobs))
    if len(rows) <= 1:
        return [k for k in keys if k.endswith("model_name")]
    return [k for k in keys if len({repr(r.knobs.get(k)) for r in rows}) > 1]


def table(rows: Sequence[ConfigRow]) -> tuple[list[str], list[list[str]]]:
    """Headers and cells of the progress table."""
    knob_keys = _varying_knobs(rows)
    metric_names: dict[str, None] = {}
    for row in rows:
        metric_names.update(dict.fromkeys(m for m in row.metrics if m not in _HIDDEN_METRICS))
    headers = ["config", "status", "shards", "rows", *metric_names, *knob_keys, "rows/s"]
    cells = []
    for row in rows:
        rate = f"{row.n / row.seconds:.2f}" if row.seconds > 0 else "-"
        errors = f" ({row.errors} errors)" if row.errors else ""
        cells.append(
            [
                str(row.config_id),
                row.status,
                f"{row.shards_done}/{row.num_shards}",
                f"{row.n}/{row.population}{errors}",
                *(metric_cell(row.metrics[m]) if m in row.metrics else "" for m in metric_names),
                *(_knob_text(row.knobs.get(k)) for k in knob_keys),
                rate,
            ]
        )
    return headers, cells


def _knob_text(value: Any) -> str:
    return "" if value is None else str(value)


def to_markdown(rows: Sequence[ConfigRow]) -> str:
    """The table as GitHub Markdown."""
    headers, cells = table(rows)
    esc = [[c.replace("|", "\\|") for c in line] for line in [headers, *cells]]
    lines = ["| " + " | ".join(esc[0]) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(line) + " |" for line in esc[1:]]
    return "\n".join(lines)


def to_html(rows: Sequence[ConfigRow]) -> str:
    """The table as an HTML fragment (what notebooks render)."""
    headers, cells = table(rows)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in line) + "</tr>" for line in cells
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def to_rich(rows: Sequence[ConfigRow], title: str = "") -> Any:
    """The table as a rich Table."""
    from rich.table import Table

    headers, cells = table(rows)
    out = Table(title=title or None)
    for header in headers:
        out.add_column(header)
    for line in cells:
        out.add_row(*line)
    return out


class LiveView:
    """Refreshes the table after every shard.

    mode "auto": a live rich table on a terminal, an updating HTML display in a notebook, and
    otherwise (a log file, a pipe) one progress line per update and the Markdown table once, at
    the end. "rich", "notebook", "text" force one; "none" is silent.
    """

    def __init__(self, mode: str = "auto", title: str = "", stream: TextIO | None = None) -> None:
        if mode not in ("auto", "rich", "notebook", "text", "none"):
            raise ValueError(f"display must be auto, rich, notebook, text or none; got {mode!r}")
        self.stream = stream or sys.stdout
        self.title = title
        if mode == "auto":
            if _in_notebook():
                mode = "notebook"
            elif getattr(self.stream, "isatty", lambda: False)():
                mode = "rich"
            else:
                mode = "text"
        self.mode = mode
        self._live: Any = None
        self._handle: Any = None
        self._rows: list[ConfigRow] = []
        """text: the latest rows, whose table `close` prints."""

    def update(self, rows: Sequence[ConfigRow]) -> None:
        if self.mode == "none":
            return
        if self.mode == "text":
            self._rows = list(rows)
            done = sum(r.shards_done for r in rows)
            total = sum(r.num_shards for r in rows)
            print(
                f"{self.title}: {done}/{total} shards done over {len(rows)} config(s)",
                file=self.stream,
                flush=True,
            )
        elif self.mode == "notebook":
            from IPython.display import HTML, display

            if self._handle is None:
                self._handle = display(HTML(to_html(rows)), display_id=True)
            else:
                self._handle.update(HTML(to_html(rows)))
        else:
            from rich.console import Console
            from rich.live import Live

            if self._live is None:
                self._live = Live(console=Console(file=self.stream), auto_refresh=False)
                self._live.start()
            self._live.update(to_rich(rows, self.title), refresh=True)

    def close(self) -> None:
        """Stop the live display; off a terminal, print the final table."""
        if self.mode == "text" and self._rows:
            print(f"{self.title}\n{to_markdown(self._rows)}\n", file=self.stream, flush=True)
            self._rows = []
        if self._live is not None:
            self._live.stop()
            self._live = None


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    ip = shell.get_ipython() if hasattr(shell, "get_ipython") else None
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"
