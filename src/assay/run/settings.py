"""RunSettings: everything a benchmark run needs besides its tasks, each setting declared once.

A field's declaration carries its default, help text, `assay run` flag and what it changes
(`Effect`). `assay run`'s parser, `evaluate()`'s keywords, the settings results.json records and
the identity that decides whether an output folder resumes are all derived from it; the tests
check that every field reaches each of them. The module is import-light: the CLI reads it to
build `--help`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.errors import ConfigError
from assay.sandbox.policy import MODES
from assay.seeds import DEFAULT_SEEDS, Seeds, parse_seeds

if TYPE_CHECKING:
    from assay.models.base import LM, BackendLike
    from assay.sandbox import SandboxMode

UNCLOSED_THINKING = ("empty", "keep", "fail")
"""The choices of --unclosed-thinking (RunSettings.unclosed_thinking)."""
SAMPLES_REASONING = ("full", "length", "none")
"""The choices of --log-samples-reasoning (RunSettings.log_samples_reasoning)."""


class Effect(StrEnum):
    """What a setting changes; it decides where the setting is recorded (`meaning` says how)."""

    NUMBERS = "numbers"
    NUMERICS = "numerics"
    IDENTITY = "identity"
    FILES = "files"
    NOTHING = "nothing"

    @property
    def meaning(self) -> str:
        """What settings of this effect change, and where they are recorded."""
        return _MEANINGS[self]


_MEANINGS = {
    Effect.NUMBERS: "what the model is asked or how its answers are scored: written to "
    "results.json's provenance settings, and part of the run's identity (a run with another "
    "value is another run)",
    Effect.NUMERICS: "floating-point noise at most (kernels and batch shapes): written to "
    "results.json's provenance settings, since it can explain a last-digit difference, but not "
    "part of the run's identity, so a run resumed with another batch size or device is the same "
    "run",
    Effect.IDENTITY: "the model and the seeds: part of the run's identity, written in blocks of "
    "their own (the backend's identity, `seeds`)",
    Effect.FILES: "what the output files hold, not the numbers: part of the run's identity only",
    Effect.NOTHING: "where and how fast the run goes, where it is reported, what it may spend: "
    "neither recorded among the settings nor part of the run's identity",
}


FlagParser = Callable[[Any, str], Any]
"""Turns a flag's parsed value into the setting's value; gets the flag's name for messages."""


@dataclass(frozen=True)
class Flag:
    """How `assay run` spells a setting."""

    names: tuple[str, ...]
    """The flag and its aliases, long form first ("--limit", "-L")."""
    argparse: dict[str, Any]
    """Keyword arguments of argparse's add_argument beside dest and help (type, action,
    choices, metavar; `default` only where the flag's differs from the setting's)."""
    parse: FlagParser | None = None
    """Converts the flag's value (a string, a list of them) into the setting's; None: as is."""


@dataclass(frozen=True)
class Setting:
    """One run setting's declaration: its help, what it changes, and its flag."""

    help: str
    effect: Effect
    flag: Flag | None
    """None: the Python API alone sets it."""


def _setting(
    value: Any,
    effect: Effect,
    help: str,
    *flags: str,
    parse: FlagParser | None = None,
    **argparse: Any,
) -> Any:
    """A RunSettings field declared with everything that uses it; a list or dict default is
    given as its type (list, dict) and built fresh for each instance."""
    spec = Setting(help, effect, Flag(flags, argparse, parse) if flags else None)
    if value in (list, dict):
        return field(default_factory=value, metadata={"setting": spec})
    return field(default=value, metadata={"setting": spec})


def _limit(text: str) -> int | float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(
            f"{text}: give a positive number of docs per task, or a fraction below 1 (0.1 = 10%)"
        )
    return value if value < 1.0 else int(value)


def _batch(text: str) -> int | str:
    if text == "auto":
        return text
    if text.startswith("auto:"):  # lm-eval's auto:N; run as auto (cli/lm_eval_flags says why)
        if not text[5:].isdigit() or int(text[5:]) < 1:
            raise argparse.ArgumentTypeError(f"{text}: auto:N takes a whole number N >= 1")
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number or 'auto'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: give 1 or more rows per batch, or 'auto'")
    return value


def _usd(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an amount of USD") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text}: give a positive amount of USD, e.g. 5 or 0.25")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be 1 or more")
    return value


def _kv(value: Any, flag: str) -> dict[str, Any]:
    from assay.models.args import parse_kv

    return parse_kv(value, flag)


def _csv(value: Any, flag: str) -> list[str]:
    from assay.tasks.names import split_csv

    return split_csv(value)


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

    model: str | LM | BackendLike = _setting(
        "hf", _IDENTITY,
        "backend: a built-in or an installed plugin's name; from Python also an LM object, or "
        "any object with LM's request methods and identity (assay.models.base.BackendLike)",
        "--model", "-m",
    )  # fmt: skip
    model_args: dict[str, Any] = _setting(
        dict, _NOTHING,
        "k=v,k2=v2 (or JSON) passed to the backend (the run compares the model's identity, "
        "which leaves out arguments that change no answer)",
        "--model-args", "-a", parse=_kv, default="",
    )  # fmt: skip
    limit: int | float | None = _setting(
        None, _NUMBERS,
        "first N docs per task (a value < 1 is a fraction of the docs)",
        "--limit", "-L", type=_limit,
    )  # fmt: skip
    samples: dict[str, list[int]] | None = _setting(
        None, _NUMBERS,
        "doc ids per task, as JSON or a JSON file: '{\"arc_easy\": [0, 5]}' (lm-eval's "
        "--samples; tasks not named run every doc; not with --limit)",
        "--samples", "-E", parse=lambda value, flag: parse_samples(value, flag),
    )  # fmt: skip
    num_fewshot: int | None = _setting(
        None, _NUMBERS,
        "few-shot examples per doc (default each task's own)",
        "--num-fewshot", "-f", type=int,
    )  # fmt: skip
    batch_size: int | str | None = _setting(
        None, _NUMERICS,
        "rows per batch, or auto (lm-eval's auto:N runs as auto); default the backend's",
        "--batch-size", "-b", type=_batch,
    )  # fmt: skip
    device: str | None = _setting(
        None, _NUMERICS,
        "cpu, cuda, cuda:0, mps ... (default the backend's)",
        "--device",
    )  # fmt: skip
    apply_chat_template: bool = _setting(
        False, _NUMBERS,
        "render prompts with the model's chat template",
        "--apply-chat-template", action="store_true",
    )  # fmt: skip
    system_instruction: str | None = _setting(
        None, _NUMBERS,
        "system prompt placed before the task description",
        "--system-instruction",
    )  # fmt: skip
    fewshot_keep_self: bool = _setting(
        False, _NUMBERS,
        "lm-eval's few-shot rule exactly: where a task draws its examples from the evaluated "
        "split without fewshot_split (lm-eval keeps a doc that is drawn as its own example), "
        "keep it too; by default assay replaces it with another row and says so",
        "--fewshot-keep-self", action="store_true",
    )  # fmt: skip
    fewshot_as_multiturn: bool | None = _setting(
        None, _NUMBERS,
        "few-shot examples as chat turns (default: yes under --apply-chat-template)",
        "--fewshot-as-multiturn", action="store_true",
    )  # fmt: skip
    gen_kwargs: dict[str, Any] = _setting(
        dict, _NUMBERS,
        "generation settings k=v,... merged into every generative task (they win over the "
        "task's)",
        "--gen-kwargs", parse=_kv, default="",
    )  # fmt: skip
    metadata: dict[str, Any] = _setting(
        dict, _NUMBERS,
        "JSON (or k=v) merged into every task's metadata (lm-eval's --metadata), which reaches "
        "custom dataset functions, e.g. '{\"max_seq_lengths\": [4096]}'",
        "--metadata", parse=_kv, default="",
    )  # fmt: skip
    predict_only: bool = _setting(
        False, _NUMBERS,
        "log the model's answers without computing metrics (lm-eval's bypass metric; implies "
        "--log-samples)",
        "--predict-only", "-x", action="store_true",
    )  # fmt: skip
    cluster_by: dict[str, str] = _setting(
        dict, _NUMBERS,
        "cluster a task's docs by a dataset field (docs sharing a passage, story...): results "
        "add <metric>_stderr_clustered; TASK=FIELD, comma separated or repeatable (wins over "
        "the task's own cluster_key)",
        "--cluster-by", parse=lambda value, flag: parse_cluster_by(value), action="append",
        default=[], metavar="TASK=FIELD",
    )  # fmt: skip
    bootstrap_iters: int = _setting(
        100_000, _NUMBERS,
        "bootstrap iterations for the stderr of non-mean aggregations (0 disables)",
        "--bootstrap-iters", type=int,
    )  # fmt: skip
    judge_model: str | None = _setting(
        None, _NUMBERS,
        "backend that grades answers for judge metrics (judge_score, judge_pairwise, "
        "judge_correct, judge_rubric): hf, openai-chat, vllm, dummy, replay ...; a task that "
        "names its own judge_model uses that one",
        "--judge-model",
    )  # fmt: skip
    judge_model_args: dict[str, Any] = _setting(
        dict, _NUMBERS,
        "k=v,k2=v2 (or JSON) passed to the judge backend",
        "--judge-model-args", parse=_kv, default="",
    )  # fmt: skip
    second_judge_model: str | None = _setting(
        None, _NUMBERS,
        "a second judge of the same answers: results add its number and the two judges' "
        "agreement (Cohen's kappa, Krippendorff's alpha); the task's number stays the first's",
        "--second-judge-model",
    )  # fmt: skip
    second_judge_model_args: dict[str, Any] = _setting(
        dict, _NUMBERS,
        "k=v,k2=v2 (or JSON) passed to the second judge backend",
        "--second-judge-model-args", parse=_kv, default="",
    )  # fmt: skip
    unclosed_thinking: str = _setting(
        "empty", _NUMBERS,
        "a generation whose thinking never closed is scored as an empty answer (empty), as "
        "lm-eval scores it, the unfinished thought (keep), or fails its task (fail); "
        "docs/reasoning-models.md (default empty)",
        "--unclosed-thinking", choices=list(UNCLOSED_THINKING),
    )  # fmt: skip
    sandbox: SandboxMode = _setting(
        "auto", _NUMBERS,
        "where model-written code runs: auto (bubblewrap namespaces; refused where they "
        "cannot start), bwrap, docker (needs --sandbox-image), rlimits (limits only: no "
        "network or file isolation), none (assay.sandbox.policy.ISOLATION)",
        "--sandbox", choices=list(MODES),
    )  # fmt: skip
    sandbox_image: str | None = _setting(
        None, _NUMBERS,
        "docker: the image programs run in (it must hold python3)",
        "--sandbox-image",
    )  # fmt: skip
    seed: Seeds = _setting(
        DEFAULT_SEEDS, _IDENTITY,
        "lm-eval's seeds: Python's random, numpy, torch (also sampled generations and sampled "
        "judgements) and few-shot selection; one number sets all four, None leaves one unset "
        "(default 0,1234,1234,1234, as lm-eval)",
        "--seed", parse=lambda value, flag: parse_seeds(value, flag),
        metavar="N|PYTHON,NUMPY,TORCH,FEWSHOT",
    )  # fmt: skip
    log_samples: bool = _setting(
        False, _FILES,
        "write a samples file per task (needs --output-path or --output-dir)",
        "--log-samples", "-s", action="store_true",
    )  # fmt: skip
    log_samples_reasoning: str = _setting(
        "full", _FILES,
        "what samples files keep of each generation's thinking: its text (full), its length in "
        "characters, or nothing (default full)",
        "--log-samples-reasoning", choices=list(SAMPLES_REASONING),
    )  # fmt: skip
    output_path: str | Path | None = _setting(
        None, _NOTHING,
        "lm-eval's output: a folder gets OUT/<model>/results_<timestamp>.json (and "
        "samples_<task>_<timestamp>.jsonl), any number of runs side by side, the same run "
        "again resuming its own files; a path ending in .json is that results file",
        "--output-path", "-o",
    )  # fmt: skip
    output_dir: str | Path | None = _setting(
        None, _NOTHING,
        "one run per folder: OUT/results.json, samples_<task>.jsonl and the response cache; "
        "the same run again resumes there, a different run is refused",
        "--output-dir",
    )  # fmt: skip
    overwrite: bool = _setting(
        False, _NOTHING,
        "replace a different earlier run's results in --output-dir or an --output-path .json "
        "file (the same run resumes)",
        "--overwrite", action="store_true",
    )  # fmt: skip
    cache: str | Path | bool | None = _setting(
        None, _NOTHING,
        "response cache file (default OUTPUT_DIR/cache.sqlite; from Python, False for none)",
        "--cache",
    )  # fmt: skip
    confirm_run_unsafe_code: bool = _setting(
        False, _NOTHING,
        "allow tasks that execute model-written code",
        "--confirm-run-unsafe-code", action="store_true",
    )  # fmt: skip
    sandbox_workers: int | None = _setting(
        None, _NOTHING,
        "model-written programs run at once (default one per CPU)",
        "--sandbox-workers", type=_positive_int,
    )  # fmt: skip
    dataset_loading_processes: int = _setting(
        4, _NOTHING, "datasets loaded in parallel before the model is built"
    )
    show_progress: bool = _setting(
        True, _NOTHING,
        "no progress display at all (transformers' and datasets' bars included)",
        "--no-progress", parse=lambda value, flag: not value, action="store_true",
        default=False,
    )  # fmt: skip
    executor: str = _setting(
        "local", _NOTHING,
        "where requests run: this process (local), or Ray actors holding model replicas",
        "--executor", choices=["local", "ray"],
    )  # fmt: skip
    replicas: int | None = _setting(
        None, _NOTHING,
        "ray: model replicas (default one per GPU of the cluster, one without GPUs)",
        "--replicas", type=_positive_int,
    )  # fmt: skip
    gpus_per_replica: float | None = _setting(
        None, _NOTHING,
        "ray: GPUs per replica, e.g. the vLLM tensor-parallel size (default 1, 0 without GPUs)",
        "--gpus-per-replica", type=float,
    )  # fmt: skip
    ray_address: str | None = _setting(
        None, _NOTHING,
        "ray: cluster to join, e.g. auto or ray://head:10001 (default a local Ray instance)",
        "--ray-address",
    )  # fmt: skip
    batch_api: bool = _setting(
        False, _NOTHING,
        "send API requests through the provider's batch API (openai-chat, openai-completions, "
        "anthropic-chat): half price, answered within 24 h; a re-run follows the batches "
        "already submitted (docs/api-models.md)",
        "--batch-api", action="store_true",
    )  # fmt: skip
    max_cost: float | None = _setting(
        None, _NOTHING,
        "stop before the run's API requests (model and judges) would cost more than USD; "
        "answers so far stay in the cache, and a re-run with a larger budget continues "
        "(needs the models' prices: docs/api-models.md)",
        "--max-cost", type=_usd, metavar="USD",
    )  # fmt: skip
    log_to: list[str] = _setting(
        list, _NOTHING,
        "log the finished run to mlflow, wandb, trackio or hub (comma separated or "
        "repeatable; each needs its extra: pip install 'assay[mlflow]' ...; needs --output-path or --output-dir)",
        "--log-to", parse=_csv, action="append", default=[], metavar="TRACKER",
    )  # fmt: skip
    log_to_args: dict[str, Any] = _setting(
        dict, _NOTHING,
        "tracker settings k=v,...: name (default the output dir's name), project, "
        "tracking_uri (mlflow), entity (wandb), group (wandb, trackio), space_id (trackio), "
        "repo=ORG/NAME, private (hub)",
        "--log-to-args", parse=_kv, default="",
    )  # fmt: skip

    def __post_init__(self) -> None:
        # `seed` takes lm-eval's forms (an int for all four, "0,1234,1234,1234", a list).
        self.seed = parse_seeds(self.seed, "seed")


def parse_samples(value: str | dict[str, Any] | None, flag: str = "--samples") -> Any:
    """--samples as given: a JSON object, or the path of a file holding one (lm-eval's forms)."""
    if value is None or isinstance(value, dict):
        return value
    import json

    text = value
    if not value.lstrip().startswith("{"):
        try:
            text = Path(value).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"{flag} {value!r}: neither a JSON object nor a readable file ({exc.strerror})."
            ) from None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{flag}: not valid JSON: {exc.msg} at column {exc.colno}.") from None
    if not isinstance(parsed, dict):
        raise ConfigError(
            f'{flag}: expected a JSON object like {{"task": [0, 5]}}, got {parsed!r}.'
        )
    return parsed


def parse_cluster_by(value: str | list[str] | dict[str, str] | None) -> dict[str, str]:
    """--cluster-by values, each "task=field" (or several, comma separated), as a dict."""
    if value is None or isinstance(value, dict):
        return dict(value or {})
    out: dict[str, str] = {}
    for item in [value] if isinstance(value, str) else value:
        for part in (p.strip() for p in item.split(",") if p.strip()):
            task, sep, key = (s.strip() for s in part.partition("="))
            if not sep or not task or not key:
                raise ConfigError(
                    f"--cluster-by {part!r}: expected TASK=FIELD, e.g. race=article "
                    "(the dataset field whose docs share a context)."
                )
            out[task] = key
    return out


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


def names_changing(*effects: Effect) -> list[str]:
    """The settings whose effect is one of `effects`, in declaration order."""
    return [name for name in setting_names() if describe(name).effect in effects]


RECORDED = (Effect.NUMBERS, Effect.NUMERICS)
"""The effects of the settings results.json records under `assay.provenance.settings`."""
RUN_IDENTITY = (Effect.NUMBERS, Effect.IDENTITY, Effect.FILES)
"""The effects of the settings that make two runs the same run (an output folder resumes only
the same run)."""
