"""lighteval's own task definitions, converted to assay's TaskConfig and Doc.

A file written for lighteval imports `lighteval.tasks.lighteval_task.LightevalTaskConfig`,
`lighteval.tasks.requests.Doc` and `lighteval.metrics.metrics.Metrics` and lists its tasks in
`TASKS_TABLE`. The registry imports it as any custom task file (so lighteval must be installed:
`assay[lighteval-tasks]`), then each LightevalTaskConfig found there, or among lighteval's
built-in tasks, is converted here field by field, keeping what lighteval's native pipeline
(`lighteval accelerate`) does with it rather than what its docstring says:

| LightevalTaskConfig | assay TaskConfig |
| --- | --- |
| name, hf_repo, hf_subset, hf_revision, hf_filter, hf_avail_splits, evaluation_splits, version | the same |
| prompt_function | called on each row with lighteval's `__few_shots` / `__index` keys added; the lighteval Doc it returns becomes an assay Doc (`doc_from_lighteval`) |
| few_shots_split (None) | lighteval's choice: the first available non-evaluation split matching train, dev, valid or default, else the evaluation split |
| few_shots_select (None = balanced) | `lighteval:<name>`: lighteval's own selection (`tasks.fewshot`) |
| generation_size, stop_sequence | the same; as in lighteval they override what a prompt function put on its Doc |
| metrics | `compat.lighteval.metrics`: assay's metric where the computation is identical, else lighteval's own functions |
| num_samples | derived from the metrics, as lighteval does (the field itself is unused by lighteval) |
| num_fewshots | from the task string (`name|k`), as lighteval (the field itself is overwritten) |
| generation_grammar | refused (no assay backend is grammar-constrained) |
| must_remove_duplicate_docs, original_num_docs, effective_num_docs | not applied: lighteval's native pipeline never acts on them |
| solver, scorer, sample_fields, sample_to_fewshot, filter | not used: they serve lighteval's inspect-ai path only |

Every converted task gets `prompt_layout="lighteval"`: prompts are assembled as lighteval's
PromptManager assembles them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from assay.compat.lighteval.code import EXECUTES_MODEL_CODE
from assay.compat.lighteval.docs import doc_from_lighteval
from assay.doc import Doc, OutputType
from assay.errors import ConfigError, TaskConfigError
from assay.tasks.config import MetricSpec, TaskConfig

if TYPE_CHECKING:
    from assay.metrics.base import Aggregation, Metric

log = logging.getLogger(__name__)

LIGHTEVAL_VERSION = "0.13.0"
"""The lighteval release assay's conversion is written and tested against."""

EXTRA_HINT = (
    "the extra assay[lighteval-tasks] pins lighteval==0.13.0, whose own pins (nltk==3.9.1, "
    "latex2sympy2_extended==1.0.6) clash with assay's, so it goes in an environment of its own: "
    "pip install torch==2.13.0 lighteval==0.13.0 && pip install --no-deps assay "
    "(`make lighteval-venv` builds one in a checkout)"
)


class LightevalMissingError(TaskConfigError):
    """A lighteval task file or task name was used without lighteval installed."""


def missing_lighteval(what: str) -> LightevalMissingError:
    """The error for `what` (which says what needs lighteval) without lighteval installed."""
    return LightevalMissingError(
        f"{what}, and lighteval is not installed. Install it: {EXTRA_HINT}."
    )


def check_version(what: str) -> None:
    """A lighteval other than the tested release loads with a warning naming both versions."""
    from importlib.metadata import version

    found = version("lighteval")
    if found != LIGHTEVAL_VERSION:
        log.warning(
            "%s: lighteval %s is installed; assay converts lighteval %s's task configs, docs "
            "and metrics (lighteval changes them between releases).",
            what,
            found,
            LIGHTEVAL_VERSION,
        )


def is_lighteval_config(obj: Any) -> bool:
    """Whether `obj` is a LightevalTaskConfig (checked without importing lighteval)."""
    return any(
        c.__name__ == "LightevalTaskConfig" and c.__module__.startswith("lighteval.")
        for c in type(obj).__mro__
    )


@dataclass(frozen=True)
class LightevalPrompt:
    """A lighteval prompt function as assay calls prompt functions: (row, task name) -> Doc.

    lighteval adds `__few_shots` (the row is a few-shot example) and `__index` (its index in
    the split) to each row before calling the function; assay's Task passes them in `row`
    (TaskConfig.row_extras), and this converts the Doc the function returns.
    """

    function: Callable[[dict[str, Any], str], Any]
    source: str

    def __call__(self, row: dict[str, Any], task_name: str) -> Doc | None:
        made = self.function(row, task_name)
        if made is None or (isinstance(made, list) and not made):
            return None  # lighteval skips the row
        return doc_from_lighteval(made, f"task {task_name!r} ({self.source})")


# ------------------------------------------------------------------ configs
_INSPECT_ONLY = ("solver", "scorer", "sample_fields", "sample_to_fewshot", "filter")
_FEWSHOT_SPLIT_KEYS = ("train", "dev", "valid", "default")


def lighteval_fewshot_split(config: Any) -> str | None:
    """The few-shot split lighteval uses: few_shots_split, else the first available split
    that is not evaluated and contains train, dev, valid or default (in that order of keys),
    else None (the evaluation split)."""
    if config.few_shots_split:
        return str(config.few_shots_split)
    candidates = [s for s in config.hf_avail_splits or () if s not in config.evaluation_splits]
    for key in _FEWSHOT_SPLIT_KEYS:
        for split in candidates:
            if key in split:
                return str(split)
    return None


def config_from_lighteval(config: Any, source: str) -> TaskConfig:
    """assay's TaskConfig for lighteval's LightevalTaskConfig `config` (see the module doc)."""
    where = f"task {config.name!r} ({source})"
    if config.generation_grammar is not None:
        raise TaskConfigError(
            f"{where}: 'generation_grammar' needs a grammar-constrained server (TGI); no assay "
            "backend can honour it. Remove the field."
        )
    for name in _INSPECT_ONLY:
        if getattr(config, name, None) is not None:
            log.info(
                "%s: %r serves lighteval's inspect-ai path only; its native pipeline, which "
                "assay follows, does not use it.",
                where,
                name,
            )
    for name, unused in (
        ("must_remove_duplicate_docs", False),
        ("original_num_docs", -1),
        ("effective_num_docs", -1),
        ("num_samples", None),
        ("num_fewshots", 0),
    ):
        if getattr(config, name, unused) != unused:
            log.warning(
                "%s: %s=%r is not applied: lighteval's native pipeline never acts on it (the "
                "shots come from the task string, `name|k`).",
                where,
                name,
                getattr(config, name),
            )
    metrics = [_unwrap_metric(m, where) for m in config.metrics]
    fewshot_split = lighteval_fewshot_split(config)
    samples = num_samples(metrics)
    converted = TaskConfig(
        name=config.name,
        prompt_function=LightevalPrompt(config.prompt_function, source),
        hf_repo=config.hf_repo,
        hf_subset=config.hf_subset,
        metrics=metric_specs(metrics, where),
        hf_revision=config.hf_revision,
        hf_filter=config.hf_filter,
        hf_avail_splits=list(config.hf_avail_splits),
        evaluation_splits=list(config.evaluation_splits),
        few_shots_split=fewshot_split or config.evaluation_splits[0],
        few_shots_select=f"lighteval:{config.few_shots_select or 'balanced'}",
        generation_size=config.generation_size,
        stop_sequence=list(config.stop_sequence or ()),
        num_samples=samples if samples > 1 else None,
        version=config.version,
        output_type=output_type(metrics, where),
        prompt_layout="lighteval",
        row_extras=True,
        unsafe_code=any(_qualified(m.sample_level_fn) in EXECUTES_MODEL_CODE for m in metrics),
        source=source,
    )
    if samples > 1:  # lighteval's sampling metrics read every generation of a doc
        converted.filters = (("none", [("take_first_k", {"k": samples})]),)
    return converted


_OUTPUT_OF_CATEGORY = {
    "LOGPROBS": OutputType.MULTIPLE_CHOICE,
    "GENERATIVE": OutputType.GENERATE_UNTIL,
    "PERPLEXITY": OutputType.LOGLIKELIHOOD_ROLLING,
}


def _qualified(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def output_type(metrics: Sequence[Any], where: str) -> OutputType:
    """How the task queries the model: lighteval derives it from its metrics' categories."""
    categories = sorted({str(m.category.value) for m in metrics})
    if len(categories) != 1:
        raise TaskConfigError(
            f"{where}: its metrics query the model in {len(categories)} ways ({', '.join(categories)}); "
            "assay runs one per task. Split it into one task per kind of metric."
            if categories
            else f"{where}: no metrics; add at least one to 'metrics'."
        )
    return _OUTPUT_OF_CATEGORY[categories[0]]


def num_samples(metrics: Sequence[Any]) -> int:
    """Generations per doc: the most any sampling metric (pass@k, maj@n ...) needs, as
    lighteval derives it."""
    from lighteval.metrics.metrics_sample import SamplingMetric

    counts = [
        m.sample_level_fn.num_samples()
        for m in metrics
        if isinstance(m.sample_level_fn, SamplingMetric)
    ]
    return max([1, *counts])


@dataclass(eq=False)
class LightevalMetricGroup:
    """One lighteval `Metric` object of a converted task (a grouping reports several names).

    Its names share it so lighteval's sample function runs once per sample: the last sample
    scored and its result are kept here."""

    metric: Any
    """lighteval's Metric (SampleLevelMetric, CorpusLevelMetric, ...Grouping)."""
    last_sample: Any = None
    last_result: dict[str, Any] = field(default_factory=dict)


@dataclass
class LightevalMetricRef:
    """Which reported name of a lighteval metric a MetricSpec stands for."""

    group: LightevalMetricGroup
    name: str
    """The name lighteval reports (`Metric.metric_name`, or one of a grouping's names)."""
    runs_model_code: bool = False
    """The metric runs the model's programs (`EXECUTES_MODEL_CODE`)."""

    def build(self, name: str, config: TaskConfig) -> tuple[Metric, Aggregation]:
        """The metric and its aggregation, scored as `compat.lighteval.metrics` says."""
        from assay.compat.lighteval.metrics import build

        return build(name, self, config)

    def check_decoding(self, config: TaskConfig, do_sample: bool) -> None:
        """A task whose metrics need several generations per doc (pass@k, maj@n, avg@n with
        n > 1) is refused with greedy decoding, as lighteval's backends refuse it: n greedy
        generations are one generation n times."""
        if (config.num_samples or 1) > 1 and not do_sample:
            raise ConfigError(
                f"{config.where()}: its metrics need {config.num_samples} generations per doc, "
                "but decoding is greedy (lighteval refuses this too: the generations would be "
                "identical). Sample: --gen-kwargs do_sample=true,temperature=0.6 (or name n=1 "
                "in the task string, e.g. 'lighteval|aime24@n=1|0')."
            )


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>")


def metric_specs(metrics: Sequence[Any], where: str) -> list[MetricSpec]:
    """One MetricSpec per name the metrics report, each pointing at its lighteval metric.

    A name lighteval builds from a function's repr (`normalize_pred=<function f at 0x7f..>`)
    is reported without the memory address, which changes from run to run."""
    specs: list[MetricSpec] = []
    for metric in metrics:
        group = LightevalMetricGroup(metric)
        code = _qualified(metric.sample_level_fn) in EXECUTES_MODEL_CODE
        names = metric.metric_name if isinstance(metric.metric_name, list) else [metric.metric_name]
        specs += [
            MetricSpec(_ADDRESS.sub(">", name), peer=LightevalMetricRef(group, name, code))
            for name in names
        ]
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise TaskConfigError(
                f"{where}: two of its metrics report {spec.name!r}; lighteval would keep only the "
                "last value. Keep one of them."
            )
        seen.add(spec.name)
    return specs


def _unwrap_metric(metric: Any, where: str) -> Any:
    """The Metric of a `Metrics` member whose value is itself a member: what lighteval's
    yourbench template builds with `extend_enum(Metrics, name, Metrics.x)`. lighteval 0.13.0 unwraps
    one level only and then fails ('Metrics' object has no attribute 'category'); the metric
    meant is the inner member's, which assay uses, saying so."""
    from enum import Enum

    if not isinstance(metric, Enum):
        return metric
    inner = metric
    while isinstance(inner, Enum):
        inner = inner.value
    log.warning(
        "%s: its metrics hold the Metrics member %s where lighteval expects a metric (an alias "
        "made with extend_enum); scoring with that member's metric %r (lighteval 0.13.0 itself "
        "stops on it).",
        where,
        metric.name,
        inner.metric_name,
    )
    return inner


def convert_table(table: Sequence[Any], source: str) -> list[TaskConfig]:
    """A custom file's TASKS_TABLE with every LightevalTaskConfig converted (assay TaskConfigs
    pass through)."""
    if any(is_lighteval_config(c) for c in table):
        check_version(source)
    return [config_from_lighteval(c, source) if is_lighteval_config(c) else c for c in table]
