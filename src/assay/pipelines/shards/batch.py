"""One batch through a config: preprocess -> generate -> postprocess -> metrics.

Reserved keys: ``prompts`` (returned by preprocess_fn, one per row: a string or a list of chat
messages) and ``generated_text`` (added after generation, seen by postprocess_fn and
compute_metrics_fn). Rows whose generation failed are recorded with their error and left out of
postprocessing and scoring, so an error message is never scored as if the model had said it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assay.errors import ConfigError
from assay.pipelines.configs.eval_config import EvalConfig
from assay.pipelines.shards.engines import EnginePool, GenerationFailure, to_prompt
from assay.pipelines.shards.store import StoredRow


class PipelineError(ConfigError):
    """A user function of an eval config failed, or broke the batch contract."""


@dataclass(slots=True)
class BatchOutcome:
    """What one batch produced."""

    row_indices: list[int]
    """Dataset row of each batch row."""
    prompts: list[Any]
    outputs: list[str | None]
    errors: list[str | None]
    records: list[dict[str, Any]]
    """Every column of each row after postprocessing (before it, for failed rows)."""
    scored: list[int] = field(default_factory=list)
    """Positions (within the batch) of the rows that were scored."""
    metrics: dict[str, dict[str, Any]] | None = None
    """compute_metrics_fn output on the scored rows (per-row lists reduced to their mean)."""
    row_scores: dict[str, list[float]] = field(default_factory=dict)
    """Per-row scores of metrics returned as per-row lists, aligned with `scored`."""

    def stored_rows(self, config_id: int, shard: int) -> list[StoredRow]:
        """The batch's rows as the experiment store keeps them, scores by name."""
        position = {i: j for j, i in enumerate(self.scored)}
        return [
            StoredRow(
                config_id,
                row_index,
                shard,
                self.prompts[i],
                self.outputs[i],
                self.errors[i],
                {
                    name: scores[position[i]]
                    for name, scores in self.row_scores.items()
                    if i in position
                },
                self.records[i],
            )
            for i, row_index in enumerate(self.row_indices)
        ]


def _columns(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    keys: dict[str, None] = {}
    for row in rows:
        keys.update(dict.fromkeys(row))
    return {k: [row.get(k) for row in rows] for k in keys}


def _subset(columns: Mapping[str, Any], keep: Sequence[int], n: int) -> dict[str, Any]:
    """Rows `keep` of every per-row column (columns of another length are kept whole)."""
    return {
        k: [v[i] for i in keep] if isinstance(v, list | tuple) and len(v) == n else v
        for k, v in columns.items()
    }


def _row(columns: Mapping[str, Any], i: int, n: int) -> dict[str, Any]:
    return {k: v[i] for k, v in columns.items() if isinstance(v, list | tuple) and len(v) == n}


def _call(config: EvalConfig, name: str, where: str, *args: Any) -> Any:
    fn = getattr(config, name)
    try:
        result = fn(*args)
    except ConfigError:
        raise
    except Exception as exc:
        raise PipelineError(f"{where}: {name} raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(result, Mapping):
        raise PipelineError(f"{where}: {name} must return a dict, got {type(result).__name__}")
    return dict(result)


def per_row_values(value: Any, n: int) -> list[float] | None:
    """The value as n floats when it is a per-row list (or array) of length n, else None."""
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    if isinstance(value, list | tuple) and len(value) == n and n > 0:
        try:
            return [float(v) for v in value]
        except (TypeError, ValueError):
            return None
    return None


def split_metrics(
    metrics: Mapping[str, Any], n: int, where: str
) -> tuple[dict[str, dict[str, Any]], dict[str, list[float]]]:
    """Batch-level metric dicts and per-row scores from a compute_metrics_fn result."""
    batch: dict[str, dict[str, Any]] = {}
    rows: dict[str, list[float]] = {}
    for name, entry in metrics.items():
        if not isinstance(entry, Mapping) or "value" not in entry:
            raise PipelineError(
                f"{where}: compute_metrics_fn must return {{name: {{'value': ...}}}}; "
                f"metric {name!r} is {entry!r}"
            )
        scores = per_row_values(entry["value"], n)
        if scores is None:
            batch[name] = dict(entry)
        else:
            rows[name] = scores
            mean = math.fsum(scores) / len(scores)
            batch[name] = {**entry, "value": mean, "per_row": scores}
    return batch, rows


def run_batch(
    config: EvalConfig,
    rows: Sequence[Mapping[str, Any]],
    row_indices: Sequence[int],
    engines: EnginePool,
    where: str,
) -> BatchOutcome:
    """Process dataset `rows` (at `row_indices`) through `config`; `where` names the batch."""
    n = len(rows)
    batch = _columns(rows)
    if config.preprocess_fn is not None:
        batch = _call(config, "preprocess_fn", where, batch, config.rag, config.prompt_manager)
    if "prompts" not in batch:
        raise PipelineError(
            f"{where}: preprocess_fn returned no 'prompts' key (got keys {sorted(batch)}); "
            "return {'prompts': [...one prompt per row...], **batch}"
        )
    raw_prompts = batch["prompts"]
    if not isinstance(raw_prompts, list | tuple) or len(raw_prompts) != n:
        size = (
            len(raw_prompts)
            if isinstance(raw_prompts, list | tuple)
            else type(raw_prompts).__name__
        )
        raise PipelineError(
            f"{where}: 'prompts' must hold one prompt per row ({n} rows), got {size}"
        )
    prompts = [to_prompt(p, f"{where} row {row_indices[i]}") for i, p in enumerate(raw_prompts)]
    generated = engines.generate(config.model, prompts, config.gen_params)
    scored = [i for i, g in enumerate(generated) if not isinstance(g, GenerationFailure)]
    outcome = BatchOutcome(
        row_indices=list(row_indices),
        prompts=list(raw_prompts),
        outputs=[None if isinstance(g, GenerationFailure) else g for g in generated],
        errors=[g.message if isinstance(g, GenerationFailure) else None for g in generated],
        records=[_row(batch, i, n) for i in range(n)],
        scored=scored,
    )
    if not scored:
        return outcome
    kept = _subset(batch, scored, n)
    kept["generated_text"] = [generated[i] for i in scored]
    if config.postprocess_fn is not None:
        kept = _call(config, "postprocess_fn", where, kept)
    for j, i in enumerate(scored):
        outcome.records[i] = _row(kept, j, len(scored))
    if config.accumulate_metrics_fn is not None:
        metrics = _call(config, "compute_metrics_fn", where, kept)
        outcome.metrics, outcome.row_scores = split_metrics(metrics, len(scored), where)
    return outcome
