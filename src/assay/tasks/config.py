"""TaskConfig: a task's fields as Python task files name them, plus the lm-eval ones YAML tasks need.

Both ways of writing a task (a Python TaskConfig, an lm-eval YAML file) end as one of these.
Fields assay cannot honour are rejected in `validate()`, never silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from assay.doc import Doc, OutputType, SamplingMethod
from assay.errors import TaskConfigError
from assay.metrics.base import metric_role
from assay.prompts.manager import PROMPT_LAYOUTS, PromptLayout
from assay.requests.types import lm_eval_gen_kwargs, normalize_gen_kwargs
from assay.tasks.fewshot import fewshot_selectors

if TYPE_CHECKING:
    from assay.metrics.base import Aggregation, Metric

PromptFunction = Callable[[dict[str, Any], str], Doc | None]
"""A prompt function: (dataset row, task name) -> Doc, or None to skip the row."""

FilterSpec = tuple[str, list[tuple[Any, dict[str, Any]]]]
"""(ensemble name, [(filter name or factory, kwargs), ...])."""


SAMPLING_OF_OUTPUT = {
    OutputType.MULTIPLE_CHOICE: SamplingMethod.LOGPROBS,
    OutputType.LOGLIKELIHOOD: SamplingMethod.LOGPROBS,
    OutputType.LOGLIKELIHOOD_ROLLING: SamplingMethod.PERPLEXITY,
    OutputType.GENERATE_UNTIL: SamplingMethod.GENERATIVE,
}


class PeerMetric(Protocol):
    """Another harness's metric, named by a task converted from that harness: it builds its own
    scorer, and says what the run must know of it beforehand."""

    runs_model_code: bool
    """It runs the model's programs: its task needs --confirm-run-unsafe-code and assay scores
    it in its sandbox."""

    def build(self, name: str, config: TaskConfig) -> tuple[Metric, Aggregation]:
        """The metric reported as `name` in `config`, with its aggregation."""
        ...

    def check_decoding(self, config: TaskConfig, do_sample: bool) -> None:
        """Refuse decoding the harness refuses for this task (a ConfigError)."""
        ...


@dataclass
class MetricSpec:
    """A metric as a task asks for it (lm-eval's metric_list entry)."""

    name: str
    """Registered metric name, or a label for `function`."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    aggregation: str | Callable[[Sequence[Any]], float] | None = None
    """Overrides the metric's default aggregation (registered name or a function)."""
    higher_is_better: bool | None = None
    function: Callable[..., Any] | None = None
    """A user metric function (lm-eval `!function`): fn(references, predictions, **kwargs)."""
    hf_evaluate: bool = False
    """The metric is `evaluate.load(name)` (lm-eval's `hf_evaluate: true`), called per doc."""
    peer: PeerMetric | None = None
    """The metric is another harness's (a task converted from it): it builds its scorer
    (`assay.compat`), assay's metric where the computation is identical."""


@dataclass
class TaskConfig:
    """A task definition.

    The Python task format's fields come first; the fields after `effective_num_docs` carry lm-eval semantics
    (delimiters, filters, repeats, generation_kwargs) so that YAML tasks render byte-identical
    prompts.
    """

    name: str
    prompt_function: PromptFunction
    hf_repo: str | None = None
    """`datasets.load_dataset` path: a hub id, or json/csv/parquet with `hf_data_files`."""
    hf_subset: str | None = None
    metrics: Sequence[MetricSpec | str] = ()
    hf_data_files: str | Sequence[str] | Mapping[str, Any] | None = None
    hf_revision: str | None = None
    hf_filter: Callable[[dict[str, Any]], bool] | None = None
    """Keep only rows for which this returns True (applied to every split)."""
    hf_avail_splits: Sequence[str] = ("train", "validation", "test")
    evaluation_splits: Sequence[str] = ("validation",)
    few_shots_split: str | None = None
    few_shots_select: str | None = None
    """One of `tasks.fewshot.fewshot_selectors()`; None means "lm_eval" (lm-eval's seeded
    stream). Another harness's (`<prefix>:<name>`, `peers.FEWSHOT_SELECTORS`) reproduce its
    selections (tasks converted from it)."""
    generation_size: int | None = None
    generation_grammar: Any = None
    stop_sequence: Sequence[str] | None = None
    num_samples: int | None = None
    """Generations per doc (lm-eval's `repeats`)."""
    version: int | float | str = 0
    num_fewshots: int = 0
    truncate_fewshots: bool = False
    must_remove_duplicate_docs: bool = False
    original_num_docs: int = -1
    """If set (>= 0), the number of eval docs the dataset must have: a data integrity check."""
    effective_num_docs: int = -1
    """If set (>= 0), evaluate only this many docs (a default for --limit)."""

    # lm-eval semantics
    num_fewshots_fixed: bool = False
    """An lm-eval YAML that sets num_fewshot: 0 keeps it whatever --num-fewshot says."""
    instruction_in_query: bool = True
    """Queries start with the instruction (stripped when prompting), as those of tasks converted
    from other harnesses do; lm-eval's don't."""
    output_type: OutputType | None = None
    """None: derived from the metrics (generation metrics -> generate_until, else multiple_choice)."""
    row_extras: bool = False
    """Add `__few_shots` (the row is a few-shot example) and `__index` (its index) to each row
    the prompt function receives (tasks converted from a harness whose prompt functions read
    them)."""
    prompt_layout: PromptLayout = "lm_eval"
    """How prompts are assembled: "lm_eval" (the delimiters below) or another harness's layout,
    by its name in `peers.PROMPT_LAYOUTS` (that of the harness a task was converted from)."""
    target_delimiter: str = " "
    fewshot_delimiter: str = "\n\n"
    fewshot_prompt_function: PromptFunction | None = None
    """Renders few-shot pool rows (lm-eval fewshot_config overrides); default prompt_function."""
    fewshot_target_delimiter: str | None = None
    fewshot_fewshot_delimiter: str | None = None
    fewshot_samples: Sequence[dict[str, Any]] | Callable[[], Sequence[dict[str, Any]]] | None = None
    """An explicit few-shot pool (lm-eval fewshot_config.samples)."""
    fewshot_drop_equal: bool | None = None
    """How the "lm_eval" selector consumes its stream: draw one example more and drop rows equal
    to the doc. lm-eval does this exactly when the few-shot split is the test split (both unset
    counts as equal); None means "when the few-shot split is an evaluation split"."""
    fewshot_seed: int | None = None
    """Seed of the few-shot selection; None means the run's --seed few-shot seed."""
    gen_prefix: Callable[[dict[str, Any]], str | None] | None = None
    """Assistant prefill per row (lm-eval gen_prefix)."""
    generation_kwargs: dict[str, Any] | None = None
    filters: Sequence[FilterSpec] = (("none", [("take_first", {})]),)
    process_docs: Callable[[Any], Any] | None = None
    """Applied to every split after loading (lm-eval process_docs)."""
    fewshot_process_docs: Callable[[Any], Any] | None = None
    process_results: Callable[[dict[str, Any], list[Any]], dict[str, Any]] | None = None
    dataset_loader: Callable[..., Mapping[str, Any]] | None = None
    """Returns {split: rows} instead of load_dataset (lm-eval custom_dataset)."""
    dataset_kwargs: dict[str, Any] = field(default_factory=dict)
    alias: str | None = None
    tags: Sequence[str] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    cluster_key: str | None = None
    """Dataset field whose value groups docs that share a context (a passage id, a story, a
    subject): results then carry a standard error clustered by it and samples record each doc's
    value. YAML tasks set it as `metadata: {cluster_key: FIELD}` (lm-eval ignores it)."""
    judge_model: str | None = None
    """The backend that grades this task's judge metrics, instead of the run's --judge-model.
    YAML tasks set it (and the three below) under `metadata:` (lm-eval ignores it)."""
    judge_model_args: dict[str, Any] = field(default_factory=dict)
    """Backend arguments of the task's judge model."""
    second_judge_model: str | None = None
    """A second judge of the task's answers (agreement is reported); needs judge_model."""
    second_judge_model_args: dict[str, Any] = field(default_factory=dict)
    """Backend arguments of the task's second judge model."""
    agent: Any = None
    """An agent task's tools and limits (`agents.AgentSpec`): the model is asked again with
    its tool calls' results until it answers. YAML tasks set it under `metadata: {agent:}`."""
    unsafe_code: bool = False
    """The task executes model-written code: refused without --confirm-run-unsafe-code."""
    source: str = ""
    """Where the task was defined (YAML path or module), for error messages and results."""
    raw_config: dict[str, Any] | None = None
    """The config as written (lm-eval `configs` entry in results.json)."""
    example_rows: Sequence[dict[str, Any]] | None = None
    """A few rows in the dataset's schema, bundled so `assay tasks show` works offline."""
    validate_hook: Callable[[], None] | None = None
    """Extra checks run before any model is loaded (e.g. bundled resources exist)."""

    def __post_init__(self) -> None:
        self.metrics = [m if isinstance(m, MetricSpec) else MetricSpec(m) for m in self.metrics]
        if isinstance(self.output_type, str):
            self.output_type = OutputType(self.output_type)

    def where(self) -> str:
        """'task NAME (SOURCE)' for error messages."""
        return f"task {self.name!r}" + (f" ({self.source})" if self.source else "")

    def validate(self) -> None:
        """Reject what assay cannot honour, with the field and the fix."""
        if not self.name or "|" in self.name:
            raise TaskConfigError(f"{self.where()}: 'name' must be non-empty and contain no '|'.")
        if not callable(self.prompt_function):
            raise TaskConfigError(f"{self.where()}: 'prompt_function' must be a callable.")
        if self.hf_repo is None and self.dataset_loader is None:
            raise TaskConfigError(
                f"{self.where()}: set 'hf_repo' (a hub dataset id, or json/csv/parquet with "
                "'hf_data_files') or a custom dataset loader."
            )
        if self.generation_grammar is not None:
            raise TaskConfigError(
                f"{self.where()}: 'generation_grammar' needs a grammar-constrained server (TGI); "
                "no assay backend can honour it. Remove the field."
            )
        selector = self.few_shots_select or "lm_eval"
        if selector not in fewshot_selectors():
            raise TaskConfigError(
                f"{self.where()}: 'few_shots_select' is {selector!r}; use one of "
                f"{', '.join(fewshot_selectors())}."
            )
        if self.prompt_layout not in PROMPT_LAYOUTS:
            raise TaskConfigError(
                f"{self.where()}: 'prompt_layout' is {self.prompt_layout!r}; use one of "
                f"{', '.join(PROMPT_LAYOUTS)}."
            )
        if self.prompt_layout != "lm_eval" and (
            self.target_delimiter != " "
            or self.fewshot_target_delimiter is not None
            or self.fewshot_fewshot_delimiter is not None
        ):
            raise TaskConfigError(
                f"{self.where()}: prompt_layout={self.prompt_layout!r} uses no target delimiters; remove "
                "'target_delimiter', 'fewshot_target_delimiter' and 'fewshot_fewshot_delimiter'."
            )
        if self.num_fewshots < 0:
            raise TaskConfigError(f"{self.where()}: 'num_fewshots' must be >= 0.")
        if self.num_samples is not None and self.num_samples < 1:
            raise TaskConfigError(f"{self.where()}: 'num_samples' must be >= 1.")
        if not self.evaluation_splits:
            raise TaskConfigError(f"{self.where()}: 'evaluation_splits' is empty.")
        if not self.metrics and self.process_results is None:
            raise TaskConfigError(f"{self.where()}: no metrics; add at least one to 'metrics'.")
        if self.resolved_output_type == OutputType.GENERATE_UNTIL:
            self._check_generation_kwargs()
        self._check_judges()
        if self.agent is not None:
            if self.resolved_output_type != OutputType.GENERATE_UNTIL:
                raise TaskConfigError(
                    f"{self.where()}: an agent task generates; set output_type: generate_until."
                )
            self.agent.check(self.where())
            if self.agent.sandboxed and not self.unsafe_code:
                raise TaskConfigError(
                    f"{self.where()}: the agent's programs and commands run in the sandbox; set "
                    "unsafe_code=True, so that runs need --confirm-run-unsafe-code."
                )
        if self.validate_hook is not None:
            self.validate_hook()

    def _check_judges(self) -> None:
        for name in ("judge_model", "second_judge_model"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise TaskConfigError(
                    f"{self.where()}: '{name}' must be a backend name (hf, openai-chat, vllm, "
                    f"replay, dummy ...), got {value!r}."
                )
            if not isinstance(getattr(self, f"{name}_args"), dict):
                raise TaskConfigError(
                    f"{self.where()}: '{name}_args' must be a mapping of backend arguments, got "
                    f"{getattr(self, f'{name}_args')!r}."
                )
        if self.second_judge_model is not None and self.judge_model is None:
            raise TaskConfigError(
                f"{self.where()}: 'second_judge_model' needs 'judge_model' (the first judge)."
            )

    def _check_generation_kwargs(self) -> None:
        """Bad generation settings fail here, before a model is built, not at the first request."""
        if self.generation_kwargs is not None and not isinstance(self.generation_kwargs, dict):
            raise TaskConfigError(f"{self.where()}: 'generation_kwargs' must be a mapping.")
        normalize_gen_kwargs(
            lm_eval_gen_kwargs(self.generation_kwargs, self.fewshot_delimiter),
            default_until=[self.fewshot_delimiter],
            source=f"{self.where()}: generation_kwargs",
        )

    @property
    def resolved_output_type(self) -> OutputType:
        """The output type, derived from the metrics when not given."""
        if self.output_type is not None:
            return self.output_type
        # Each metric declares the output type it prefers at registration; a rolling metric
        # wins over a generative one, and a task whose metrics prefer none is multiple_choice.
        preferred = {metric_role(m.name).output_type for m in self.metrics}  # type: ignore[union-attr]
        for output_type in (OutputType.LOGLIKELIHOOD_ROLLING, OutputType.GENERATE_UNTIL):
            if output_type in preferred:
                return output_type
        return OutputType.MULTIPLE_CHOICE

    @property
    def sampling_method(self) -> SamplingMethod:
        """How docs of this task query the model (the Doc's `sampling_methods`)."""
        return SAMPLING_OF_OUTPUT[self.resolved_output_type]
