"""What an experiment shows of its run: each config's metrics, the results, the status table,
the errors and paired comparisons. Read-only over the run's state (`RunState`)."""

from __future__ import annotations

from typing import Any

from assay.pipelines.experiment.display import ConfigRow
from assay.pipelines.experiment.headers import config_headers
from assay.pipelines.experiment.state import RunState
from assay.pipelines.experiment.table import paired_scores
from assay.pipelines.shards.batch import _columns
from assay.pipelines.shards.live_metrics import SAMPLES
from assay.pipelines.shards.scheduler import Status
from assay.stats.online import Estimate, paired_difference
from assay.util.redact import scrub, scrub_value

Results = dict[int, tuple[dict[str, list[Any]], dict[str, dict[str, Any]]]]
"""config id -> (processed rows as columns, metrics), as RapidFire's run_evals returns."""


class ExperimentViews:
    """The experiment's tables and numbers, computed from its run state when asked."""

    def __init__(self, state: RunState) -> None:
        self._state = state

    def metrics(self, config_id: int) -> dict[str, dict[str, Any]]:
        """See `Experiment.metrics`."""
        state = self._state
        state.check_known(config_id)
        run = state.runs[config_id]
        config, counts, seconds = run.config, run.metrics, run.seconds
        user = run.user_metrics()
        out: dict[str, dict[str, Any]] = {
            "run_id": {"value": config_id},
            "model_name": {"value": config.model.model_name},
            **{
                k: {"value": scrub_value(v, state.secrets)}
                for k, v in config_headers(config.model, config.leaf).items()
            },
            SAMPLES: {"value": counts.samples},
            "Generation Errors": {"value": counts.errors},
            "Processing Time": {"value": seconds},
            "Samples Per Second": {"value": counts.samples / seconds if seconds else 0.0},
        }
        out.update({k: v for k, v in user.items() if k != SAMPLES})
        return out

    def results(self) -> Results:
        """See `Experiment.results`."""
        out: Results = {}
        for cid, status in self._state.statuses().items():
            if status in (Status.DELETED, Status.FAILED):
                continue
            out[cid] = (_columns(self._state.runs[cid].records), self.metrics(cid))
        return out

    def errors(self) -> dict[int, str]:
        """See `Experiment.errors`."""
        state = self._state
        return {cid: scrub(str(exc), state.secrets) for cid, exc in state.failures().items()}

    def status_rows(self) -> list[ConfigRow]:
        """See `Experiment.status_rows`."""
        state = self._state
        rows = []
        for cid, status in state.statuses().items():
            if status == Status.DELETED:
                continue
            run = state.runs[cid]
            assert state.scheduler is not None
            shown = {} if status == Status.FAILED else self._shown_metrics(cid, status)
            rows.append(
                ConfigRow(
                    config_id=cid,
                    status=status.value,
                    shards_done=state.scheduler.configs[cid].shards_done,
                    num_shards=state.scheduler.num_shards,
                    n=run.metrics.samples,
                    population=len(state.rows),
                    errors=run.metrics.errors,
                    seconds=run.seconds,
                    metrics=shown,
                    knobs=run.config.knobs(),
                )
            )
        return rows

    def _shown_metrics(self, cid: int, status: Status) -> dict[str, dict[str, Any]]:
        run = self._state.runs[cid]
        if run.metrics.live or status in (Status.COMPLETED, Status.STOPPED):
            return run.user_metrics()
        return {}

    def compare(self, config_a: int, config_b: int, metric: str) -> Estimate:
        """See `Experiment.compare`."""
        state = self._state
        assert state.store is not None
        state.check_known(config_a)
        state.check_known(config_b)
        scores_a, scores_b = paired_scores(state.store, config_a, config_b, metric)
        entry = self.metrics(config_a).get(metric, {})
        return paired_difference(
            scores_a,
            scores_b,
            value_range=tuple(entry.get("value_range") or (0.0, 1.0)),
            population=len(state.rows),
            settings=state.runs[config_a].config.settings,
        )
