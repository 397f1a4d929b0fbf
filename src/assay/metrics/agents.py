"""Metrics of agent tasks, read from each sample's transcript (`agents.Transcript`).

- `tool_call_match`: 1.0 when the calls the model made over the whole loop equal the doc's
  expected calls (the dataset field `field`, a list of {name, arguments}): names equal and
  arguments equal as JSON values, in order (or as a multiset with `ordered: false`); a call
  whose arguments did not parse matches nothing.
- `end_state`: 1.0 when the sample's state after the loop (what its tools changed, starting
  from `AgentSpec.state_field`) equals the doc's field `field`.

Both are mean-aggregated; a task that is not an agent task is refused by name.
"""

from __future__ import annotations

import json
from typing import Any

from assay.doc import OutputType
from assay.errors import ConfigError, DataError
from assay.metrics.base import Metric, SampleInput, register_metric


def _transcript(sample: SampleInput, metric: str) -> Any:
    if sample.transcript is None:
        raise ConfigError(
            f"metric {metric!r} scores an agent's transcript; this task declares no agent "
            "(metadata.agent in YAML, TaskConfig.agent in Python)."
        )
    return sample.transcript


def _expected(sample: SampleInput, field: str, metric: str) -> Any:
    row = sample.doc.row or {}
    if field not in row:
        raise DataError(
            f"metric {metric!r}: doc {sample.doc.id or '?'} has no field {field!r} (the "
            f"expected value); name another with {metric}: {{field: NAME}}."
        )
    value = row[field]
    return json.loads(value) if isinstance(value, str) else value


def _key(name: Any, arguments: Any) -> str:
    return json.dumps([name, arguments], sort_keys=True)


@register_metric("tool_call_match", output_type=OutputType.GENERATE_UNTIL)
def tool_call_match(*, field: str = "expected_calls", ordered: bool = True) -> Metric:
    """1.0 when the model's tool calls equal the doc's expected calls (see the module)."""
    if not isinstance(field, str) or not isinstance(ordered, bool):
        raise ConfigError("tool_call_match: 'field' is a dataset field name, 'ordered' true/false.")

    def sample_fn(sample: SampleInput) -> float:
        made = [
            _key(c.name, c.arguments) if c.arguments is not None else None
            for c in _transcript(sample, "tool_call_match").calls()
        ]
        expected = _expected(sample, field, "tool_call_match")
        if not isinstance(expected, list):
            raise DataError(
                f"metric 'tool_call_match': field {field!r} of doc {sample.doc.id or '?'} must "
                f"be a list of {{name, arguments}}, got {expected!r}."
            )
        wanted = [_key(e.get("name"), e.get("arguments", {})) for e in expected]
        if None in made:
            return 0.0
        return float(made == wanted if ordered else sorted(made) == sorted(wanted))  # type: ignore[type-var]

    return Metric("tool_call_match", sample_fn, "mean", True, frozenset({OutputType.GENERATE_UNTIL}),
                  {"field": field, "ordered": ordered})  # fmt: skip


@register_metric("end_state", output_type=OutputType.GENERATE_UNTIL)
def end_state(*, field: str = "expected_state") -> Metric:
    """1.0 when the sample's state after the loop equals the doc's expected state."""
    if not isinstance(field, str):
        raise ConfigError("end_state: 'field' must name a dataset field.")

    def sample_fn(sample: SampleInput) -> float:
        state = _transcript(sample, "end_state").end_state
        expected = _expected(sample, field, "end_state")
        return float(json.dumps(state, sort_keys=True) == json.dumps(expected, sort_keys=True))

    return Metric("end_state", sample_fn, "mean", True, frozenset({OutputType.GENERATE_UNTIL}),
                  {"field": field})  # fmt: skip
