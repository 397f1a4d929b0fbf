"""RunSettings: everything a benchmark run needs besides its tasks, each setting declared once.

A field's declaration carries its default, help text, `assay run` flag, what it changes
(`Effect`) and its check: the conversion every value given for it goes through, however the
settings are made (`assay run`'s flags, a --config file, `evaluate()`, `RunSettings(...)`), so
that each entry point refuses a bad value with the same message. `assay run`'s parser,
`evaluate()`'s keywords, `Experiment`'s executor keywords, the settings results.json records
and the identity that decides whether an output folder resumes are all derived from it; the
tests check that every field reaches each of them. The module is import-light: the CLI reads it
to build `--help`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.errors import ConfigError
from assay.run import setting_checks as checks
from assay.run.setting_spec import Effect, Setting, declare
from assay.sandbox.policy import MODES
from assay.seeds import DEFAULT_SEEDS, Seeds, parse_seeds

if TYPE_CHECKING:
    from assay.models.base import LM, BackendLike
    from assay.sandbox import SandboxMode

EXECUTORS = ("local", "ray")
"""The choices of --executor (RunSettings.executor)."""
UNCLOSED_THINKING = ("empty", "keep", "fail")
"""The choices of --unclosed-thinking (RunSettings.unclosed_thinking)."""
SAMPLES_REASONING = ("full", "length", "none")
"""The choices of --log-samples-reasoning (RunSettings.log_samples_reasoning)."""
BATCH_FAILED = ("resubmit", "stop")
"""The choices of --batch-failed (RunSettings.batch_failed), the API backends' batch_failed."""


_NUMBERS, _NUMERICS, _IDENTITY, _FILES, _NOTHING = (
    Effect.NUMBERS,
    Effect.NUMERICS,
    Effect.IDENTITY,
    Effect.FILES,
    Effect.NOTHING,
)


@dataclass
class RunSettings:
    """Everything a run needs besides the tasks: the `assay run` flags, as values.

    Each field is declared once, with its default, help text, flag and what it changes (see
    `Setting`); `assay run`'s parser, `evaluate()`'s keywords, results.json's settings and the
    run identity that decides whether an output folder resumes are all read from these
    declarations (`describe(name)` gives one).
    """

    model: str | LM | BackendLike = declare(
        "hf", _IDENTITY,
        "backend: a built-in or an installed plugin's name; from Python also an LM object, or "
        "any object with LM's request methods and identity (assay.models.base.BackendLike)",
        "--model", "-m",
    )  # fmt: skip
    model_args: dict[str, Any] = declare(
        dict, _NOTHING,
        "k=v,k2=v2 (or JSON) passed to the backend (the run compares the model's identity, "
        "which leaves out arguments that change no answer)",
        "--model-args", "-a", check=checks.kv, default="",
    )  # fmt: skip
    limit: int | float | None = declare(
        None, _NUMBERS,
        "first N docs per task (a value < 1 is a fraction of the docs)",
        "--limit", "-L", check=checks.optional(checks.doc_limit),
    )  # fmt: skip
    samples: dict[str, list[int]] | None = declare(
        None, _NUMBERS,
        "doc ids per task, as JSON or a JSON file: '{\"arc_easy\": [0, 5]}' (lm-eval's "
        "--samples; tasks not named run every doc; not with --limit)",
        "--samples", "-E", check=lambda value, where: checks.parse_samples(value, where),
    )  # fmt: skip
    num_fewshot: int | None = declare(
        None, _NUMBERS,
        "few-shot examples per doc (default each task's own)",
        "--num-fewshot", "-f", check=checks.optional(checks.at_least(0, "must be 0 or more")),
    )  # fmt: skip
    batch_size: int | str | None = declare(
        None, _NUMERICS,
        "rows per batch, or auto (lm-eval's auto:N runs as auto; wins over --model-args "
        "batch_size=, saying so); default the backend's",
        "--batch-size", "-b", check=checks.optional(checks.batch_size),
    )  # fmt: skip
    device: str | None = declare(
        None, _NUMERICS,
        "cpu, cuda, cuda:0, mps ... (default the backend's)",
        "--device", check=checks.OPTIONAL_TEXT,
    )  # fmt: skip
    apply_chat_template: bool = declare(
        False, _NUMBERS,
        "render prompts with the model's chat template",
        "--apply-chat-template", check=checks.switch, action="store_true",
    )  # fmt: skip
    system_instruction: str | None = declare(
        None, _NUMBERS,
        "system prompt placed before the task description",
        "--system-instruction", check=checks.OPTIONAL_TEXT,
    )  # fmt: skip
    fewshot_keep_self: bool = declare(
        False, _NUMBERS,
        "lm-eval's few-shot rule exactly: where a task draws its examples from the evaluated "
        "split without fewshot_split (lm-eval keeps a doc that is drawn as its own example), "
        "keep it too; by default assay replaces it with another row and says so",
        "--fewshot-keep-self", check=checks.switch, action="store_true",
    )  # fmt: skip
    fewshot_as_multiturn: bool | None = declare(
        None, _NUMBERS,
        "few-shot examples as chat turns (default: yes under --apply-chat-template)",
        "--fewshot-as-multiturn", check=checks.optional(checks.switch), action="store_true",
    )  # fmt: skip
    gen_kwargs: dict[str, Any] = declare(
        dict, _NUMBERS,
        "generation settings k=v,... merged into every generative task (they win over the "
        "task's)",
        "--gen-kwargs", check=checks.gen_kwargs, default="",
    )  # fmt: skip
    metadata: dict[str, Any] = declare(
        dict, _NUMBERS,
        "JSON (or k=v) merged into every task's metadata (lm-eval's --metadata), which reaches "
        "custom dataset functions, e.g. '{\"max_seq_lengths\": [4096]}'",
        "--metadata", check=checks.kv, default="",
    )  # fmt: skip
    predict_only: bool = declare(
        False, _NUMBERS,
        "log the model's answers without computing metrics (lm-eval's bypass metric; implies "
        "--log-samples)",
        "--predict-only", "-x", check=checks.switch, action="store_true",
    )  # fmt: skip
    cluster_by: dict[str, str] = declare(
        dict, _NUMBERS,
        "cluster a task's docs by a dataset field (docs sharing a passage, story...): results "
        "add <metric>_stderr_clustered; TASK=FIELD, comma separated or repeatable (wins over "
        "the task's own cluster_key)",
        "--cluster-by", check=lambda value, where: checks.parse_cluster_by(value, where),
        action="append",
        default=[], metavar="TASK=FIELD",
    )  # fmt: skip
    bootstrap_iters: int = declare(
        100_000, _NUMBERS,
        "bootstrap iterations for the stderr of non-mean aggregations (0 disables)",
        "--bootstrap-iters",
        check=checks.at_least(0, "give 0 or more iterations (0 disables the bootstrap)"),
    )  # fmt: skip
    judge_model: str | None = declare(
        None, _NUMBERS,
        "backend that grades answers for model-graded (judge) metrics: hf, openai-chat, vllm, "
        "dummy, replay ...; a task that names its own judge_model uses that one",
        "--judge-model", check=checks.OPTIONAL_TEXT,
    )  # fmt: skip
    judge_model_args: dict[str, Any] = declare(
        dict, _NUMBERS,
        "k=v,k2=v2 (or JSON) passed to the judge backend",
        "--judge-model-args", check=checks.kv, default="",
    )  # fmt: skip
    second_judge_model: str | None = declare(
        None, _NUMBERS,
        "a second judge of the same answers: results add its number and the two judges' "
        "agreement (Cohen's kappa, Krippendorff's alpha); the task's number stays the first's",
        "--second-judge-model", check=checks.OPTIONAL_TEXT,
    )  # fmt: skip
    second_judge_model_args: dict[str, Any] = declare(
        dict, _NUMBERS,
        "k=v,k2=v2 (or JSON) passed to the second judge backend",
        "--second-judge-model-args", check=checks.kv, default="",
    )  # fmt: skip
    unclosed_thinking: str = declare(
        "empty", _NUMBERS,
        "a generation whose thinking never closed is scored as an empty answer (empty), as "
        "lm-eval scores it, the unfinished thought (keep), or fails its task (fail); "
        "docs/reasoning-models.md (default empty)",
        "--unclosed-thinking", check=checks.choice(UNCLOSED_THINKING),
        metavar=checks.options(UNCLOSED_THINKING),
    )  # fmt: skip
    sandbox: SandboxMode = declare(
        "auto", _NUMBERS,
        "where model-written code runs: auto (bubblewrap namespaces; refused where they "
        "cannot start), bwrap, docker (needs --sandbox-image), rlimits (limits only: no "
        "network or file isolation), none (assay.sandbox.policy.ISOLATION)",
        "--sandbox", check=checks.choice(MODES), metavar=checks.options(MODES),
    )  # fmt: skip
    sandbox_image: str | None = declare(
        None, _NUMBERS,
        "docker: the image programs run in (it must hold python3)",
        "--sandbox-image", check=checks.OPTIONAL_TEXT,
    )  # fmt: skip
    seed: Seeds = declare(
        DEFAULT_SEEDS, _IDENTITY,
        "lm-eval's seeds: Python's random, numpy, torch (also sampled generations and sampled "
        "judgements) and few-shot selection; one number sets all four, None leaves one unset "
        "(default 0,1234,1234,1234, as lm-eval)",
        "--seed", check=parse_seeds,
        metavar="N|PYTHON,NUMPY,TORCH,FEWSHOT",
    )  # fmt: skip
    log_samples: bool = declare(
        False, _FILES,
        "write a samples file per task (needs --output-path or --output-dir)",
        "--log-samples", "-s", check=checks.switch, action="store_true",
    )  # fmt: skip
    log_samples_reasoning: str = declare(
        "full", _FILES,
        "what samples files keep of each generation's thinking: its text (full), its length in "
        "characters, or nothing (default full)",
        "--log-samples-reasoning", check=checks.choice(SAMPLES_REASONING),
        metavar=checks.options(SAMPLES_REASONING),
    )  # fmt: skip
    output_path: str | Path | None = declare(
        None, _NOTHING,
        "lm-eval's output: a folder gets OUT/<model>/results_<timestamp>.json (and "
        "samples_<task>_<timestamp>.jsonl), any number of runs side by side, the same run "
        "again resuming its own files; a path ending in .json is that results file",
        "--output-path", "-o",
    )  # fmt: skip
    output_dir: str | Path | None = declare(
        None, _NOTHING,
        "one run per folder: OUT/results.json, samples_<task>.jsonl and the response cache; "
        "the same run again resumes there, a different run is refused",
        "--output-dir",
    )  # fmt: skip
    overwrite: bool = declare(
        False, _NOTHING,
        "replace a different earlier run's results in --output-dir or an --output-path .json "
        "file (the same run resumes)",
        "--overwrite", check=checks.switch, action="store_true",
    )  # fmt: skip
    cache: str | Path | bool | None = declare(
        None, _NOTHING,
        "response cache file (default OUTPUT_DIR/cache.sqlite; from Python, False for none)",
        "--cache",
    )  # fmt: skip
    confirm_run_unsafe_code: bool = declare(
        False, _NOTHING,
        "allow tasks that execute model-written code",
        "--confirm-run-unsafe-code", check=checks.switch, action="store_true",
    )  # fmt: skip
    sandbox_workers: int | None = declare(
        None, _NOTHING,
        "model-written programs run at once (default one per CPU)",
        "--sandbox-workers", check=checks.NO_FEWER_THAN_ONE,
    )  # fmt: skip
    dataset_loading_processes: int = declare(
        4, _NOTHING, "datasets loaded in parallel before the model is built",
        check=checks.at_least(1, "must be 1 or more"),
    )  # fmt: skip
    show_progress: bool = declare(
        True, _NOTHING,
        "no progress display at all (transformers' and datasets' bars included)",
        "--no-progress", check=checks.switch, action="store_false",
    )  # fmt: skip
    executor: str = declare(
        "local", _NOTHING,
        "where requests run: this process (local), or Ray actors holding model replicas",
        "--executor", check=checks.choice(EXECUTORS), metavar=checks.options(EXECUTORS),
        executor=True,
    )  # fmt: skip
    replicas: int | None = declare(
        None, _NOTHING,
        "ray: model replicas (default one per GPU of the cluster, one without GPUs)",
        "--replicas", check=checks.NO_FEWER_THAN_ONE, executor=True,
    )  # fmt: skip
    gpus_per_replica: float | None = declare(
        None, _NOTHING,
        "ray: GPUs per replica, e.g. the vLLM tensor-parallel size (default 1, 0 without GPUs)",
        "--gpus-per-replica", check=checks.optional(checks.gpus), executor=True,
    )  # fmt: skip
    ray_address: str | None = declare(
        None, _NOTHING,
        "ray: cluster to join, e.g. auto or ray://head:10001 (default a local Ray instance)",
        "--ray-address", check=checks.OPTIONAL_TEXT, executor=True,
    )  # fmt: skip
    batch_api: bool = declare(
        False, _NOTHING,
        "send API requests through the provider's batch API (openai-chat, openai-completions, "
        "anthropic-chat): half price, answered within 24 h; a re-run follows the batches "
        "already submitted (docs/api-models.md)",
        "--batch-api", check=checks.switch, action="store_true",
    )  # fmt: skip
    batch_failed: str = declare(
        "resubmit", _NOTHING,
        "--batch-api: requests that an earlier run's batches left unanswered (the batch "
        "failed, expired or was cancelled, or refused them) are submitted again (resubmit), "
        "or reported as failed without being sent (stop) (default resubmit)",
        "--batch-failed", check=checks.choice(BATCH_FAILED), metavar=checks.options(BATCH_FAILED),
    )  # fmt: skip
    max_cost: float | None = declare(
        None, _NOTHING,
        "stop before the run's API requests (model and judges) would cost more than USD; "
        "answers so far stay in the cache, and a re-run with a larger budget continues "
        "(needs the models' prices: docs/api-models.md)",
        "--max-cost", check=checks.optional(checks.usd), metavar="USD",
    )  # fmt: skip
    log_to: list[str] = declare(
        list, _NOTHING,
        "log the finished run to mlflow, wandb, trackio or hub (comma separated or "
        "repeatable; each needs its extra: pip install 'assay[mlflow]' ...; needs --output-path "
        "or --output-dir)",
        "--log-to", check=checks.names, action="append", default=[], metavar="TRACKER",
    )  # fmt: skip
    log_to_args: dict[str, Any] = declare(
        dict, _NOTHING,
        "tracker settings k=v,...: name (default the output dir's name), project, "
        "tracking_uri (mlflow), entity (wandb), group (wandb, trackio), space_id (trackio), "
        "repo=ORG/NAME, private (hub)",
        "--log-to-args", check=checks.kv, default="",
    )  # fmt: skip

    def __post_init__(self) -> None:
        # Every value, however it was given, becomes the setting's value or is refused here.
        for spec in fields(self):
            check = spec.metadata["setting"].check
            if check is not None:
                setattr(self, spec.name, check(getattr(self, spec.name), where(spec.name)))


def default(name: str) -> Any:
    """The default value of the RunSettings field `name` (a fresh one for dict fields)."""
    spec = next(f for f in fields(RunSettings) if f.name == name)
    if spec.default is not MISSING:
        return spec.default
    factory: Any = spec.default_factory
    return factory()


def setting_names() -> list[str]:
    """The names of every RunSettings field, in declaration order."""
    return [f.name for f in fields(RunSettings)]


def describe(name: str) -> Setting:
    """The declaration of the RunSettings field `name`."""
    spec = next(f for f in fields(RunSettings) if f.name == name)
    return spec.metadata["setting"]


def where(name: str) -> str:
    """How messages name the setting `name`: its flag, or (without one) its field name."""
    flag = describe(name).flag
    return flag.names[0] if flag is not None else name


def checked(name: str, value: Any, place: str | None = None) -> Any:
    """`value` as the setting `name` takes it, or a ConfigError naming `place` (default the
    setting's flag): the check RunSettings applies, for values on their way to one."""
    check = describe(name).check
    return value if check is None else check(value, place or where(name))


def executor_names() -> list[str]:
    """The settings saying where requests run (declared `executor=True`), executor first."""
    return [name for name in setting_names() if describe(name).executor]


def executor_settings(given: Mapping[str, Any], owner: str) -> dict[str, Any]:
    """The executor settings (`executor_names`) from `given`, by field name, or their
    defaults, each checked; `owner` names the caller in messages (`Experiment` takes these as
    keywords of its own)."""
    names = executor_names()
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ConfigError(
            f"{owner}: {unknown[0]!r} is not a keyword; the executor settings are "
            f"{', '.join(names)}."
        )
    values = {name: given.get(name, default(name)) for name in names}
    return {name: checked(name, value, f"{owner} {name}") for name, value in values.items()}


def unused_on_local(values: Mapping[str, Any]) -> list[str]:
    """The Ray pool's settings given (not None) where the executor is local: they would go
    unused, so callers refuse them."""
    if values["executor"] != "local":
        return []
    return [name for name in executor_names()[1:] if values[name] is not None]


def names_changing(*effects: Effect) -> list[str]:
    """The settings whose effect is one of `effects`, in declaration order."""
    return [name for name in setting_names() if describe(name).effect in effects]


RECORDED = (Effect.NUMBERS, Effect.NUMERICS)
"""The effects of the settings results.json records under `assay.provenance.settings`."""
RUN_IDENTITY = (Effect.NUMBERS, Effect.IDENTITY, Effect.FILES)
"""The effects of the settings that make two runs the same run (an output folder resumes only
the same run)."""
