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
        config, counts = state.configs[config_id], state.metrics[config_id]
        user = state.user_metrics(config_id)
        seconds = state.seconds.get(config_id, 0.0)
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
            out[cid] = (_columns(self._state.records[cid]), self.metrics(cid))
        return out

    def errors(self) -> dict[int, str]:
        """See `Experiment.errors`."""
        state = self._state
        return {cid: scrub(str(exc), state.secrets) for cid, exc in state.failures.items()}

    def status_rows(self) -> list[ConfigRow]:
        """See `Experiment.status_rows`."""
        state = self._state
        rows = []
        for cid, status in state.statuses().items():
            if status == Status.DELETED:
                continue
            counts = state.metrics[cid]
            assert state.scheduler is not None
            shown = {} if status == Status.FAILED else self._shown_metrics(cid, status)
            rows.append(
                ConfigRow(
                    config_id=cid,
                    status=status.value,
                    shards_done=state.scheduler.configs[cid].shards_done,
                    num_shards=state.scheduler.num_shards,
                    n=counts.samples,
                    population=len(state.rows),
                    errors=counts.errors,
                    seconds=state.seconds.get(cid, 0.0),
                    metrics=shown,
                    knobs=state.configs[cid].knobs(),
                )
            )
        return rows

    def _shown_metrics(self, cid: int, status: Status) -> dict[str, dict[str, Any]]:
        if self._state.metrics[cid].live or status in (Status.COMPLETED, Status.STOPPED):
            return self._state.user_metrics(cid)
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
            settings=state.configs[config_a].settings,
        )
