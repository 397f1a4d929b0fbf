"""An lm-eval task YAML's metric_list and filter_list as assay's metric and filter specs
(lm-eval's defaults per output type where the YAML lists none)."""

from __future__ import annotations

import logging
from typing import Any

from assay.doc import OutputType
from assay.errors import TaskConfigError
from assay.metrics.base import metric_role
from assay.tasks._yaml_io import FunctionRef
from assay.tasks.config import MetricSpec

log = logging.getLogger(__name__)

DEFAULT_METRICS = {
    OutputType.LOGLIKELIHOOD: ["perplexity", "acc"],
    OutputType.MULTIPLE_CHOICE: ["acc", "acc_norm"],
    OutputType.LOGLIKELIHOOD_ROLLING: ["word_perplexity", "byte_perplexity", "bits_per_byte"],
    OutputType.GENERATE_UNTIL: ["exact_match"],
}


def function_or(value: Any) -> Any:
    """A `!function` reference resolved to its function; any other value as given."""
    return value.resolve() if isinstance(value, FunctionRef) else value


def metric_specs(raw: dict[str, Any], output_type: OutputType, where: str) -> list[MetricSpec]:
    """The YAML's metric_list as metric specs (lm-eval's defaults for `output_type` without
    one)."""
    entries = raw.get("metric_list")
    if entries is None:
        return [MetricSpec(name) for name in DEFAULT_METRICS[output_type]]
    if not isinstance(entries, list):
        raise TaskConfigError(f"{where}: 'metric_list' must be a list of {{metric: ...}} entries.")
    specs = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or "metric" not in entry:
            raise TaskConfigError(
                f"{where}: metric_list[{i}] must be a mapping with a 'metric' key, got {entry!r}."
            )
        entry = dict(entry)
        metric = entry.pop("metric")
        aggregation = function_or(entry.pop("aggregation", None))
        higher = entry.pop("higher_is_better", None)
        scored_by_name = (
            isinstance(metric, str)
            and output_type != OutputType.GENERATE_UNTIL
            and raw.get("process_results") is None
        )
        if scored_by_name and entry:
            # lm-eval scores these output types by metric name and never reads the options
            # (`weight_by_size` on acc, `average` on f1, hf_evaluate ...): tolerated, said once.
            log.warning(
                "%s: metric_list[%d] (%s): option(s) %s are ignored for %s tasks, as lm-eval "
                "ignores them.",
                where,
                i,
                metric,
                ", ".join(sorted(entry)),
                output_type.value,
            )
            entry = {}
        if (
            isinstance(metric, str)
            and not entry.get("hf_evaluate")
            and output_type == OutputType.GENERATE_UNTIL
            and raw.get("process_results") is None
            and _scores_choices(metric)
        ):
            specs.append(_passthrough_spec(metric, entry, aggregation, higher, where, i))
            continue
        hf_evaluate = bool(entry.pop("hf_evaluate", False))
        if hf_evaluate and not isinstance(metric, str):
            raise TaskConfigError(
                f"{where}: metric_list[{i}] has hf_evaluate: true, so 'metric' must be the name "
                f"of an evaluate metric, got {metric!r}."
            )
        for flag in ("ignore_case", "ignore_punctuation", "ignore_numbers"):
            value = entry.get(flag)
            if isinstance(value, str) and value.strip().lower().startswith("true"):
                # A malformed YAML value lm-eval reads as true (any non-empty string is).
                log.warning(
                    "%s: metric_list[%d] (%s): %s is the string %r, read as true as lm-eval "
                    "reads it; write `%s: true`.",
                    where,
                    i,
                    metric,
                    flag,
                    value,
                    flag,
                )
                entry[flag] = True
        if isinstance(metric, FunctionRef):
            specs.append(
                MetricSpec(
                    metric.dotted.rsplit(".", 1)[-1], entry, aggregation, higher, metric.resolve()
                )
            )
        elif isinstance(metric, str):
            specs.append(MetricSpec(metric, entry, aggregation, higher, hf_evaluate=hf_evaluate))
        else:
            raise TaskConfigError(
                f"{where}: metric_list[{i}].metric must be a name or !function, got {metric!r}."
            )
    return specs


def _scores_choices(metric: str) -> bool:
    """A metric of choices (acc, f1 ...): lm-eval registers these as pass-through functions of
    (gold, prediction) pairs; on generated text it calls them with the pair alone (its keyword
    call fails), so the task's aggregation receives the pairs and every option is dropped."""
    return metric_role(metric).output_type == OutputType.MULTIPLE_CHOICE


def _gold_and_prediction(references: list[Any], predictions: list[Any], **_: Any) -> list[Any]:
    """lm-eval's pass-through metric on a generated answer: [gold, prediction]."""
    return [references[0], predictions[0]]


def _passthrough_spec(
    metric: str, options: dict[str, Any], aggregation: Any, higher: Any, where: str, i: int
) -> MetricSpec:
    if aggregation is None or aggregation == "mean":
        raise TaskConfigError(
            f"{where}: metric_list[{i}] ({metric}) on a generate_until task gives lm-eval's "
            "(gold, prediction) pairs, which only an aggregation function can score; set "
            "'aggregation: !function ...', or use exact_match."
        )
    if options:
        log.warning(
            "%s: metric_list[%d] (%s): option(s) %s are ignored on generate_until tasks, as "
            "lm-eval ignores them; the aggregation receives (gold, prediction) pairs.",
            where,
            i,
            metric,
            ", ".join(sorted(options)),
        )
    return MetricSpec(metric, {}, aggregation, higher, _gold_and_prediction)


def filter_specs(
    raw: dict[str, Any], where: str
) -> list[tuple[str, list[tuple[Any, dict[str, Any]]]]]:
    """The YAML's filter_list as (name, steps) pairs (lm-eval's take_first without one)."""
    entries = raw.get("filter_list")
    if entries is None:
        return [("none", [("take_first", {})])]
    if not isinstance(entries, list):
        raise TaskConfigError(f"{where}: 'filter_list' must be a list of {{name, filter}} entries.")
    out = []
    for i, entry in enumerate(entries):
        if (
            not isinstance(entry, dict)
            or "name" not in entry
            or not isinstance(entry.get("filter"), list)
        ):
            raise TaskConfigError(
                f"{where}: filter_list[{i}] needs 'name' and a 'filter' list, got {entry!r}."
            )
        steps = []
        for j, step in enumerate(entry["filter"]):
            if not isinstance(step, dict) or "function" not in step:
                raise TaskConfigError(
                    f"{where}: filter_list[{i}].filter[{j}] needs a 'function' key, got {step!r}."
                )
            kwargs = {k: function_or(v) for k, v in step.items() if k != "function"}
            steps.append((function_or(step["function"]), kwargs))
        out.append((str(entry["name"]), steps))
    return out
