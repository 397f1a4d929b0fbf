"""Metrics: a per-sample function, a corpus aggregation, a direction and a stderr rule.

The stderr rule belongs to the aggregation (closed form for `mean`, seeded bootstrap for the
others lm-eval bootstraps, none otherwise), never guessed from a function's name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from assay import peers
from assay.doc import Doc, OutputType
from assay.registry import ComponentRegistry
from assay.requests.tools import ToolCall


@dataclass(frozen=True, slots=True)
class SampleInput:
    """Everything a per-sample metric may read for one doc and one filter pipeline."""

    doc: Doc
    """The doc (its `row` is the raw dataset row)."""
    output_type: OutputType
    response: Any
    """The filtered response. multiple_choice: list of LoglikelihoodResult, one per choice;
    loglikelihood: one LoglikelihoodResult; loglikelihood_rolling: one RollingResult;
    generate_until: a string (or a list of strings when the filter keeps several)."""
    unconditioned: list[float] | None = None
    """multiple_choice with acc_mutual_info: log P(choice | "") per choice."""
    judgements: Mapping[str, Any] | None = None
    """Judge metrics: the judge's Judgement of this answer per metric name (judge stage)."""
    transcript: Any = None
    """Agent tasks: the sample's `agents.Transcript` (tool-call and end-state metrics)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """generate_until: the tools the model called in its (first) answer, in order."""
    derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """What several metrics derive from this sample, computed by the first that needs it
    (`choice.choice_outcome`), by name."""


StderrRule = Literal["mean", "nan_mean", "flat_mean", "bootstrap", "none", "peer_mean", "peer"]

PeerStderr = Callable[[Sequence[Any], int], tuple[Any, Any]]
"""(values, bootstrap_iters) -> (the standard error, a corrected one reported beside it or None
for none): another harness's formula, as that harness reports it."""


@dataclass(frozen=True, slots=True)
class Aggregation:
    """Turns the per-sample values of a metric into the task's number."""

    name: str
    fn: Callable[[Sequence[Any]], float]
    stderr: StderrRule
    """"mean": sample stddev / sqrt(n); "nan_mean": the same over the values that are not NaN
    (judge metrics: an unparseable verdict is no value); "flat_mean": the same over the
    flattened per-sample lists (IFEval instruction level); "bootstrap": seeded bootstrap;
    "none": "N/A"; "peer_mean" / "peer": `peer_stderr` computes it (another harness's metric,
    scored as that harness scores it; "peer_mean" when its formula is a mean's, sample stddev /
    sqrt(n))."""
    bootstrap_cap: int | None = None
    """Upper bound on bootstrap iterations (lm-eval caps bleu/chrf/ter at 100)."""
    peer_stderr: PeerStderr | None = None
    """The "peer_mean" and "peer" rules' formula."""


@dataclass(frozen=True, slots=True)
class Metric:
    """A metric as used by a task: its per-sample function with the task's kwargs bound."""

    name: str
    sample_fn: Callable[[SampleInput], Any]
    aggregation: str
    """Name of a registered Aggregation."""
    higher_is_better: bool
    output_types: frozenset[OutputType] = field(default_factory=frozenset)
    """Output types this metric can score; empty means any."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """The arguments the metric was built with (recorded in results configs)."""
    needs_unconditioned: bool = False
    """multiple_choice requests must include unconditioned loglikelihoods (PMI)."""


@dataclass
class ScoredMetric:
    """A metric of a task with the aggregation it uses there."""

    metric: Metric
    aggregation: Aggregation
    higher_is_better: bool


MetricFactory = Callable[..., Metric]
"""Builds a Metric from YAML metric_list kwargs (e.g. ignore_case=True)."""

METRICS: ComponentRegistry[MetricFactory] = ComponentRegistry("metric", "assay.metrics")
AGGREGATIONS: ComponentRegistry[Aggregation] = ComponentRegistry("aggregation")


@dataclass(frozen=True, slots=True)
class MetricRole:
    """What a metric declares about itself at registration, for the stages that ask by name."""

    output_type: OutputType | None = None
    """The output type a task that names this metric, and gives none, queries the model with;
    None: no preference (a task whose metrics prefer none is multiple_choice)."""
    judge: bool = False
    """Model-graded: a judge model grades the answers before the metric scores them."""


_ROLES: dict[str, MetricRole] = {}


def register_metric(
    name: str, *aliases: str, output_type: OutputType | None = None, judge: bool = False
) -> Callable[[MetricFactory], MetricFactory]:
    """Register a metric factory under `name`, with the output type a task using it defaults to
    and whether a judge model grades it (`metric_role`)."""
    role = MetricRole(output_type=output_type, judge=judge)
    for key in (name, *aliases):
        _ROLES[key] = role
    return METRICS.register(name, *aliases)


def metric_role(name: str) -> MetricRole:
    """The role metric `name` declared at registration (importing its module on first use); a
    name no registry knows, or a plugin's metric that declared none, has the default role."""
    if name not in _ROLES and name in METRICS:
        METRICS.get(name)
    return _ROLES.get(name, MetricRole())


def judge_metric_names() -> list[str]:
    """The registered metrics a judge model grades, sorted (imports every metric module: for
    messages, not for the hot path)."""
    return [name for name in METRICS.names() if metric_role(name).judge]


def register_aggregation(aggregation: Aggregation) -> Aggregation:
    """Register an aggregation under its name."""
    AGGREGATIONS.register(aggregation.name)(aggregation)
    return aggregation


for _name, _module in {
    **dict.fromkeys(
        ["acc", "acc_norm", "acc_bytes", "acc_mutual_info", "brier_score", "f1", "mcc"],
        "assay.metrics.choice",
    ),
    **dict.fromkeys(
        ["exact_match", "bleu", "chrf", "ter", "rouge", "bypass"], "assay.metrics.generation"
    ),
    **dict.fromkeys(
        ["perplexity", "word_perplexity", "byte_perplexity", "bits_per_byte"],
        "assay.metrics.perplexity",
    ),
    **dict.fromkeys(["math_verify"], "assay.metrics.math"),
    **dict.fromkeys(["tool_call_match", "end_state"], "assay.metrics.agents"),
    **dict.fromkeys(["bfcl_accuracy"], "assay.metrics.bfcl"),
    **dict.fromkeys(
        ["judge_score", "judge_pairwise", "judge_correct", "judge_rubric"],
        "assay.metrics.judges.grading",
    ),
    **dict.fromkeys(["judge_mt_bench", "judge_alpaca_eval"], "assay.metrics.judges.benchmarks"),
    **dict.fromkeys(
        [
            "prompt_level_strict_acc",
            "inst_level_strict_acc",
            "prompt_level_loose_acc",
            "inst_level_loose_acc",
        ],
        "assay.metrics.ifeval",
    ),
}.items():
    METRICS.lazy(_name, _module)

for _name in [
    "mean", "median", "nanmean", "judge_mean", "clipped_nanmean", "perplexity", "weighted_perplexity", "bits_per_byte",
    "f1", "matthews_corrcoef", "bleu", "chrf", "ter", "brier_score", "bypass",
]:  # fmt: skip
    AGGREGATIONS.lazy(_name, "assay.metrics.aggregations")
AGGREGATIONS.lazy("inst_level_acc", "assay.metrics.ifeval")


def get_metric(name: str, **kwargs: Any) -> Metric:
    """Build the registered metric `name` with `kwargs` (another harness's name for one of
    assay's metrics too: `peers.METRIC_NAMES`)."""
    if name not in METRICS:
        for source in peers.load(peers.METRIC_NAMES):
            mapped = source.translate(name, kwargs)
            if mapped is not None:
                name, kwargs = mapped
                break
    return METRICS.get(name)(**kwargs)


def is_peer_metric_name(name: str) -> bool:
    """Whether `name` is another harness's metric name (served by assay, or refused with the
    closest of assay's): such names are never looked up elsewhere."""
    return any(source.knows(name) for source in peers.load(peers.METRIC_NAMES))
