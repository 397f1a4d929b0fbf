"""A task's plan: what a run fixes for a task before its first doc, built once.

The run's settings are checked (`check_settings`) and applied to each task's config
(`configure_task`: --metadata, --cluster-by, --predict-only); `check_task` validates a task and
builds its filters and metrics before any model is loaded (a bad metric name fails in seconds,
not after the model load). Once the backend is known, its request plan (prompts, generation
policy) completes the `TaskPlan` the run follows; `doc_ids` says which docs it runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from assay.doc import Doc
from assay.errors import ConfigError, DataError
from assay.filters.base import FilterEnsemble
from assay.metrics.base import ScoredMetric
from assay.prompts.manager import PromptManager, fits_context
from assay.requests.plan import Capabilities, GenerationPolicy, PromptSettings, RequestPlan
from assay.results.schema import cluster_label
from assay.run.scoring import build_filters, build_metrics
from assay.run.settings import RunSettings
from assay.tasks.config import MetricSpec, TaskConfig
from assay.tasks.task import Task


@dataclass(frozen=True)
class Scorers:
    """A task's filter ensembles and metrics."""

    filters: list[FilterEnsemble]
    metrics: list[ScoredMetric]

    @property
    def with_unconditioned(self) -> bool:
        """Whether a metric needs log P(choice | unconditioned query) (PMI)."""
        return any(m.metric.needs_unconditioned for m in self.metrics)


def check_task(config: TaskConfig, *, confirm_run_unsafe_code: bool) -> Scorers:
    """Validate `config` and build its scorers; unknown names and bad settings fail here."""
    config.validate()
    if not config.unsafe_code:
        _check_own_code_runs(config, confirm_run_unsafe_code)
    if config.unsafe_code and not confirm_run_unsafe_code:
        from assay.tasks.code_routes import WHERE_CODE_RUNS

        raise ConfigError(
            f"{config.where()} executes model-written code. Re-run with "
            f"--confirm-run-unsafe-code if you accept that. {WHERE_CODE_RUNS}"
        )
    return Scorers(build_filters(config), build_metrics(config))


def _check_own_code_runs(config: TaskConfig, confirmed: bool) -> None:
    """A task that does not say it runs code, whose scoring could (exec, eval, a process ...),
    is a code task running in this process: refused without --confirm-run-unsafe-code, and
    marked `unsafe_code` (so the run says where its code runs) with it."""
    from assay.tasks.code_routes import runs_code_itself

    runs = runs_code_itself(config)
    if not runs:
        return
    if not confirmed:
        first = runs[0]
        raise ConfigError(
            f"{config.where()}: assay's static scan of the task's Python found that its "
            "scoring code could run code itself "
            f"({', '.join(map(str, runs[:5]))}{' ...' if len(runs) > 5 else ''}; function "
            f"{first.function} in {first.file}), though the task does not declare unsafe_code: "
            "whatever it runs (model output included) would run in this process, with no "
            "sandbox, your files, network and keys in reach. Re-run with "
            "--confirm-run-unsafe-code if you accept that."
        )
    config.unsafe_code = True


@dataclass(frozen=True)
class TaskPlan:
    """Everything the run does for one task: its docs, requests, filters and metrics."""

    task: Task
    requests: RequestPlan
    scorers: Scorers

    @property
    def name(self) -> str:
        return self.task.name


def prompt_settings(settings: RunSettings) -> PromptSettings:
    """The run's prompt flags."""
    return PromptSettings(
        settings.apply_chat_template, settings.system_instruction, settings.fewshot_as_multiturn
    )


def plan_task(
    task: Task, scorers: Scorers, settings: RunSettings, capabilities: Capabilities
) -> TaskPlan:
    """What the run does for `task`, with a backend of `capabilities`: its prompts under the
    run's prompt flags, its generation settings under --gen-kwargs and --seed, and its scorers.
    `assay run` and `assay tasks show` both build a task's requests from this plan."""
    config = task.config
    requests = RequestPlan(
        config.where(),
        config.resolved_output_type,
        prompt_manager(config, prompt_settings(settings), capabilities),
        generation_policy(config, settings.gen_kwargs, settings.seed.torch),
        scorers.with_unconditioned,
        config.truncate_fewshots,
    )
    return TaskPlan(task, requests, scorers)


def prompt_manager(
    config: TaskConfig, settings: PromptSettings, capabilities: Capabilities
) -> PromptManager:
    """The task's prompt manager under the run's prompt flags, for a backend with `capabilities`."""
    s = settings
    # A chat API takes the messages themselves; other backends render them with a template.
    api_messages = s.apply_chat_template and capabilities.accepts_messages
    chat = None
    if s.apply_chat_template and not api_messages:
        chat = capabilities.chat_template
        if chat is None:
            raise ConfigError(
                f"--apply-chat-template: the {capabilities.backend} backend has no chat template."
            )
    return PromptManager(
        target_delimiter=config.target_delimiter,
        fewshot_delimiter=config.fewshot_delimiter,
        fewshot_target_delimiter=config.fewshot_target_delimiter,
        fewshot_fewshot_delimiter=config.fewshot_fewshot_delimiter,
        system_instruction=s.system_instruction,
        chat_template=chat,
        fewshot_as_multiturn=s.multiturn,
        api_messages=api_messages,
        strip_instruction=config.instruction_in_query,
        layout=config.prompt_layout,
    )


def generation_policy(
    config: TaskConfig, overrides: Mapping[str, Any] | None = None, seed: int | None = 0
) -> GenerationPolicy:
    """The generation policy of `config` under the run's --gen-kwargs and --seed (torch)."""
    return GenerationPolicy(
        config.generation_kwargs,
        config.fewshot_delimiter,
        dict(overrides or {}),
        seed,
        f"{config.where()}: gen_kwargs",
        # Some harnesses' backends keep the prompt whole and shrink the generation to fit.
        fit_context=fits_context(config.prompt_layout),
    )


def check_settings(settings: RunSettings) -> None:
    """Reject run flags that contradict each other before any task is loaded or model built,
    naming the flags (each flag's own value is checked as RunSettings is made)."""
    if settings.batch_api and not isinstance(settings.model, str):
        raise ConfigError(
            "--batch-api applies to a backend named by --model; a model object given to "
            "evaluate() is built already: build it with batch_api=True (and batch_dir=...)."
        )
    _check_max_cost(settings)
    if settings.fewshot_as_multiturn and not settings.apply_chat_template:
        raise ConfigError("--fewshot-as-multiturn needs --apply-chat-template.")
    if settings.samples is not None and settings.limit is not None:
        raise ConfigError(
            "--samples and --limit both choose docs; give one (--samples names the doc ids)."
        )
    written = settings.output_path is not None or settings.output_dir is not None
    if (settings.log_samples or settings.predict_only) and not written:
        flag = "--predict-only" if settings.predict_only else "--log-samples"
        raise ConfigError(
            f"{flag} needs --output-path (or --output-dir): where samples files are written."
        )
    if settings.log_to or settings.log_to_args:
        from assay.results.trackers import check_trackers

        check_trackers(settings.log_to, settings.log_to_args)
        if not written:
            raise ConfigError(
                f"--log-to {','.join(settings.log_to)} needs --output-path (or --output-dir): "
                "the run's results and samples files are what it logs."
            )


def _check_max_cost(settings: RunSettings) -> None:
    """--max-cost is counted where this process sends the requests, request by request."""
    if settings.max_cost is None:
        return
    if not isinstance(settings.model, str) and getattr(settings.model, "spends", False):
        raise ConfigError(
            f"--max-cost applies to a backend named by --model; a model object given to "
            f"evaluate() is built already: build it with spending=SpendingLimit"
            f"({settings.max_cost:g}) (from assay.models.api.budget) to limit what it spends."
        )
    if settings.executor != "local":
        raise ConfigError(
            f"--max-cost with --executor {settings.executor}: the spending is counted where "
            "requests are sent, which is this process only with --executor local."
        )
    if settings.batch_api:
        raise ConfigError(
            "--max-cost with --batch-api: a batch is paid for as a whole once submitted, so it "
            "cannot stop request by request; drop one of the two."
        )


def configure_task(config: TaskConfig, settings: RunSettings) -> TaskConfig:
    """A task's config with the run's --metadata merged in and, for --predict-only, lm-eval's
    bypass metric in place of its metrics (no scoring code runs)."""
    changes: dict[str, Any] = {}
    if settings.metadata:
        changes["metadata"] = {**config.metadata, **settings.metadata}
    if config.name in settings.cluster_by:
        changes["cluster_key"] = settings.cluster_by[config.name]
    if settings.predict_only:
        # The output type stays what the task's own metrics make it.
        changes.update(
            metrics=[MetricSpec("bypass")],
            process_results=None,
            output_type=config.resolved_output_type,
        )
    return replace(config, **changes) if changes else config


def check_tasks(settings: RunSettings, tasks: Sequence[Task]) -> None:
    """--samples and --cluster-by name tasks of this run."""
    if settings.samples is not None:
        _check_samples(settings.samples, tasks)
    _check_cluster_by(settings.cluster_by, tasks)
    for task in tasks:
        _check_peer_decoding(task.config, settings)


def _check_peer_decoding(config: TaskConfig, settings: RunSettings) -> None:
    """A task converted from another harness whose metrics need several generations per doc:
    its metrics refuse the decoding that harness refuses (`PeerMetric.check_decoding`)."""
    found = [s.peer for s in config.metrics if isinstance(s, MetricSpec) and s.peer is not None]
    if not found or (config.num_samples or 1) <= 1:
        return
    policy = generation_policy(config, settings.gen_kwargs, settings.seed.torch)
    found[0].check_decoding(config, policy.params(policy.gen_kwargs(Doc(query=""))).do_sample)


def _check_samples(samples: dict[str, list[int]], tasks: Sequence[Task]) -> None:
    """--samples names tasks of this run."""
    names = [t.name for t in tasks]
    for name in samples:
        if name not in names:
            raise ConfigError(
                f"--samples: {name!r} is not a task of this run (tasks: {', '.join(names)})."
            )


def _check_cluster_by(cluster_by: dict[str, str], tasks: Sequence[Task]) -> None:
    """--cluster-by names tasks of this run."""
    names = [t.name for t in tasks]
    for name in cluster_by:
        if name not in names:
            raise ConfigError(
                f"--cluster-by: {name!r} is not a task of this run (tasks: {', '.join(names)})."
            )


def check_cluster_field(task: Task, doc: Doc | None) -> None:
    """The task's cluster field exists in its first doc (checked before the model loads)."""
    key = task.config.cluster_key
    if key is None or doc is None:
        return
    cluster_of(task, doc, 0)


def cluster_of(task: Task, doc: Doc, doc_id: int) -> Any:
    """The doc's cluster label: its value of the task's cluster field, long texts hashed
    (None when the task has none)."""
    key = task.config.cluster_key
    if key is None:
        return None
    row = doc.row or {}
    if key not in row:
        raise DataError(
            f"{task.config.where()}: cluster field {key!r} (cluster_key / --cluster-by) is not a "
            f"field of doc {doc_id}; its fields are {sorted(row)}. Name a field every doc has."
        )
    return cluster_label(row[key])


def doc_ids(task: Task, settings: RunSettings) -> list[int]:
    """The docs to run: --samples' ids for the task (in doc order), else --limit's."""
    ids = (settings.samples or {}).get(task.name)
    if ids is None:
        return task.doc_indices(settings.limit)
    total = len(task.eval_rows())
    beyond = sorted(i for i in set(ids) if i >= total)
    if beyond:
        raise ConfigError(
            f"--samples: task {task.name} has {total} docs (ids 0 to {total - 1}); "
            f"got id(s) {', '.join(map(str, beyond))}."
        )
    return sorted(set(ids))
