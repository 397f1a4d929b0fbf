"""An experiment's stored rows as a tidy table, as files, and as paired per-row scores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from assay.errors import ConfigError
from assay.pipelines.shards.store import ExperimentStore


def results_table(store: ExperimentStore | None) -> list[dict[str, Any]]:
    """Rows keyed by (config_id, row_index): prompt, output, error, one column per score."""
    if store is None:
        return []
    out = []
    for r in store.rows():
        row = {
            "config_id": r.config_id,
            "row_index": r.row_index,
            "shard": r.shard,
            "prompt": r.prompt if isinstance(r.prompt, str) else _messages_text(r.prompt),
            "generated_text": r.output,
            "error": r.error,
        }
        row.update({f"score:{name}": value for name, value in r.scores.items()})
        out.append(row)
    return out


def export_frame(frame: Any, path: str | Path) -> Path:
    """Write a pandas DataFrame to .csv, .jsonl or .parquet (by suffix)."""
    path = Path(path)
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    elif path.suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True, force_ascii=False)
    elif path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        raise ConfigError(f"export: {path.name} must end in .csv, .jsonl or .parquet")
    return path


def paired_scores(
    store: ExperimentStore, config_a: int, config_b: int, metric: str
) -> tuple[list[float], list[float]]:
    """The per-row `metric` of both configs on the rows both scored, in config_a's order."""
    scores = [
        {r.row_index: r.scores[metric] for r in store.rows(cid) if metric in r.scores}
        for cid in (config_a, config_b)
    ]
    # In the order config_a scored them (the run's shuffle): the anytime strategy's
    # guarantee holds for rows in the order they were drawn.
    shared = [i for i in scores[0] if i in scores[1]]
    if not shared:
        raise ConfigError(
            f"compare: configs {config_a} and {config_b} share no rows with per-row {metric!r} "
            "scores; per-row scores come from a compute_metrics_fn that returns a list with "
            "one value per row (and an accumulate_metrics_fn)"
        )
    return [scores[0][i] for i in shared], [scores[1][i] for i in shared]


def _messages_text(prompt: Any) -> str:
    if isinstance(prompt, list):
        parts = []
        for m in prompt:
            if isinstance(m, dict):
                parts.append(f"{m.get('role')}: {m.get('content')}")
            else:
                parts.append(": ".join(str(x) for x in m))
        return "\n".join(parts)
    return str(prompt)
