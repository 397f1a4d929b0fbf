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

import math
from collections.abc import Callable, Mapping, Sequence
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

EXECUTORS = ("local", "ray")
"""The choices of --executor (RunSettings.executor)."""
UNCLOSED_THINKING = ("empty", "keep", "fail")
"""The choices of --unclosed-thinking (RunSettings.unclosed_thinking)."""
SAMPLES_REASONING = ("full", "length", "none")
"""The choices of --log-samples-reasoning (RunSettings.log_samples_reasoning)."""
BATCH_FAILED = ("resubmit", "stop")
"""The choices of --batch-failed (RunSettings.batch_failed), the API backends' batch_failed."""


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


Check = Callable[[Any, str], Any]
"""A setting's conversion: takes a value in any of the setting's forms (a flag's text, a config
file's value, a Python value) and `where` (the flag, for messages); returns the setting's value
or raises ConfigError naming `where`, the value and the fix. A setting's own value passes
unchanged, so a check may run again (`dataclasses.replace`)."""


@dataclass(frozen=True)
class Flag:
    """How `assay run` spells a setting."""

    names: tuple[str, ...]
    """The flag and its aliases, long form first ("--limit", "-L")."""
    argparse: dict[str, Any]
    """Keyword arguments of argparse's add_argument beside dest and help (action, metavar;
    `default` only where the flag's differs from the setting's). No `type` or `choices`: the
    parser hands the text over as typed, and the setting's check converts and refuses it."""


@dataclass(frozen=True)
class Setting:
    """One run setting's declaration: its help, what it changes, its flag and its check."""

    help: str
    effect: Effect
    flag: Flag | None
    """None: the Python API alone sets it."""
    check: Check | None = None
    """The conversion every value given for the setting goes through; None: taken as given."""
    executor: bool = False
    """Whether it says where requests run (--executor and the Ray pool's settings), which
    `Experiment` takes too."""


def _setting(
    value: Any,
    effect: Effect,
    help: str,
    *flags: str,
    check: Check | None = None,
    executor: bool = False,
    **argparse: Any,
) -> Any:
    """A RunSettings field declared with everything that uses it; a list or dict default is
    given as its type (list, dict) and built fresh for each instance."""
    spec = Setting(help, effect, Flag(flags, argparse) if flags else None, check, executor)
    if value in (list, dict):
        return field(default_factory=value, metadata={"setting": spec})
    return field(default=value, metadata={"setting": spec})


def _number(value: Any, where: str, noun: str = "a number") -> float:
    """`value` (a number, or its text) as a float; anything else is refused."""
    if isinstance(value, bool):
        raise ConfigError(f"{where} {value}: not {noun}.")
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        raise ConfigError(f"{where} {value!r}: not {noun}.") from None


def _whole(value: Any, where: str) -> int:
    """`value` (a whole number, or its text) as an int; anything else is refused."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise ConfigError(f"{where} {value!r}: not a whole number.")


def _optional(check: Check) -> Check:
    """`check` for a setting that None leaves unset."""

    def optional(value: Any, where: str) -> Any:
        return None if value is None else check(value, where)

    return optional


def _at_least(low: int, fix: str) -> Check:
    """A whole number of `low` or more; `fix` says what to give instead."""

    def at_least(value: Any, where: str) -> int:
        number = _whole(value, where)
        if number < low:
            raise ConfigError(f"{where} {value}: {fix}.")
        return number

    return at_least


def _limit(value: Any, where: str) -> int | float:
    number = _number(value, where)
    if not 0 < number < math.inf:
        raise ConfigError(
            f"{where} {value}: give a positive number of docs per task, or a fraction below 1 "
            "(0.1 = 10%)."
        )
    return number if number < 1.0 else int(number)


def _batch(value: Any, where: str) -> int | str:
    if value == "auto":
        return value
    if isinstance(value, str) and value.startswith("auto:"):
        # lm-eval's auto:N; run as auto (cli/lm_eval_flags says why)
        if not value[5:].isdigit() or int(value[5:]) < 1:
            raise ConfigError(f"{where} {value}: auto:N takes a whole number N >= 1.")
        return value
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(f"{where} {value!r}: not a number or 'auto'.")
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{where} {value!r}: not a number or 'auto'.") from None
    if number < 1:
        raise ConfigError(f"{where} {value}: give 1 or more rows per batch, or 'auto'.")
    return number


def _usd(value: Any, where: str) -> float:
    amount = _number(value, where, "an amount of USD")
    if not 0 < amount < math.inf:
        raise ConfigError(f"{where} {value}: give a positive amount of USD, e.g. 5 or 0.25.")
    return amount


def _gpus(value: Any, where: str) -> float:
    amount = _number(value, where)
    if not 0 <= amount < math.inf:
        raise ConfigError(f"{where} {value}: give 0 or more GPUs per replica, e.g. 1 or 0.5.")
    return amount


def _choice(options: Sequence[str]) -> Check:
    def choice(value: Any, where: str) -> str:
        if value not in options:
            raise ConfigError(f"{where} {value!r}: choose one of {', '.join(options)}.")
        return str(value)

    return choice


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where} {value!r}: give a string.")
    return value


def _switch(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where} {value!r}: give True or False.")
    return value


def _kv(value: Any, where: str) -> dict[str, Any]:
    from assay.models.args import parse_kv

    if value is not None and not isinstance(value, str | dict):
        raise ConfigError(f"{where} {value!r}: give a dict, k=v,k2=v2 or a JSON object.")
    return parse_kv(value, where)


def _gen_kwargs(value: Any, where: str) -> dict[str, Any]:
    from assay.requests.types import normalize_gen_kwargs

    given = _kv(value, where)
    # Checked alone, whatever the tasks: a typo here must not surface mid-run.
    normalize_gen_kwargs(given, default_until=[], source=where)
    return given


def _names(value: Any, where: str) -> list[str]:
    """Names, comma separated or repeated (a string, or a list of them)."""
    from assay.tasks.names import split_csv

    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise ConfigError(f"{where} {value!r}: give names, comma separated or as a list.")
    return split_csv(items)


def _options(choices: Sequence[str]) -> str:
    """A choice flag's metavar, as argparse shows choices: {a,b,c}."""
    return "{" + ",".join(choices) + "}"


_OPTIONAL_TEXT = _optional(_text)
_NO_FEWER_THAN_ONE = _optional(_at_least(1, "must be 1 or more"))


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
        "--model-args", "-a", check=_kv, default="",
    )  # fmt: skip
    limit: int | float | None = _setting(
        None, _NUMBERS,
        "first N docs per task (a value < 1 is a fraction of the docs)",
        "--limit", "-L", check=_optional(_limit),
    )  # fmt: skip
    samples: dict[str, list[int]] | None = _setting(
        None, _NUMBERS,
        "doc ids per task, as JSON or a JSON file: '{\"arc_easy\": [0, 5]}' (lm-eval's "
        "--samples; tasks not named run every doc; not with --limit)",
        "--samples", "-E", check=lambda value, where: parse_samples(value, where),
    )  # fmt: skip
    num_fewshot: int | None = _setting(
        None, _NUMBERS,
        "few-shot examples per doc (default each task's own)",
        "--num-fewshot", "-f", check=_optional(_at_least(0, "must be 0 or more")),
    )  # fmt: skip
    batch_size: int | str | None = _setting(
        None, _NUMERICS,
        "rows per batch, or auto (lm-eval's auto:N runs as auto); default the backend's",
        "--batch-size", "-b", check=_optional(_batch),
    )  # fmt: skip
    device: str | None = _setting(
        None, _NUMERICS,
        "cpu, cuda, cuda:0, mps ... (default the backend's)",
        "--device", check=_OPTIONAL_TEXT,
    )  # fmt: skip
    apply_chat_template: bool = _setting(
        False, _NUMBERS,
        "render prompts with the model's chat template",
        "--apply-chat-template", check=_switch, action="store_true",
    )  # fmt: skip
    system_instruction: str | None = _setting(
        None, _NUMBERS,
        "system prompt placed before the task description",
        "--system-instruction", check=_OPTIONAL_TEXT,
    )  # fmt: skip
    fewshot_keep_self: bool = _setting(
        False, _NUMBERS,
        "lm-eval's few-shot rule exactly: where a task draws its examples from the evaluated "
        "split without fewshot_split (lm-eval keeps a doc that is drawn as its own example), "
        "keep it too; by default assay replaces it with another row and says so",
        "--fewshot-keep-self", check=_switch, action="store_true",
    )  # fmt: skip
    fewshot_as_multiturn: bool | None = _setting(
        None, _NUMBERS,
        "few-shot examples as chat turns (default: yes under --apply-chat-template)",
        "--fewshot-as-multiturn", check=_optional(_switch), action="store_true",
    )  # fmt: skip
    gen_kwargs: dict[str, Any] = _setting(
        dict, _NUMBERS,
        "generation settings k=v,... merged into every generative task (they win over the "
        "task's)",
        "--gen-kwargs", check=_gen_kwargs, default="",
    )  # fmt: skip
    metadata: dict[str, Any] = _setting(
        dict, _NUMBERS,
        "JSON (or k=v) merged into every task's metadata (lm-eval's --metadata), which reaches "
        "custom dataset functions, e.g. '{\"max_seq_lengths\": [4096]}'",
        "--metadata", check=_kv, default="",
    )  # fmt: skip
    predict_only: bool = _setting(
        False, _NUMBERS,
        "log the model's answers without computing metrics (lm-eval's bypass metric; implies "
        "--log-samples)",
        "--predict-only", "-x", check=_switch, action="store_true",
    )  # fmt: skip
    cluster_by: dict[str, str] = _setting(
        dict, _NUMBERS,
        "cluster a task's docs by a dataset field (docs sharing a passage, story...): results "
        "add <metric>_stderr_clustered; TASK=FIELD, comma separated or repeatable (wins over "
        "the task's own cluster_key)",
        "--cluster-by", check=lambda value, where: parse_cluster_by(value, where),
        action="append",
        default=[], metavar="TASK=FIELD",
    )  # fmt: skip
    bootstrap_iters: int = _setting(
        100_000, _NUMBERS,
        "bootstrap iterations for the stderr of non-mean aggregations (0 disables)",
        "--bootstrap-iters",
        check=_at_least(0, "give 0 or more iterations (0 disables the bootstrap)"),
    )  # fmt: skip
    judge_model: str | None = _setting(
        None, _NUMBERS,
        "backend that grades answers for model-graded (judge) metrics: hf, openai-chat, vllm, "
        "dummy, replay ...; a task that names its own judge_model uses that one",
        "--judge-model", check=_OPTIONAL_TEXT,
    )  # fmt: skip
    judge_model_args: dict[str, Any] = _setting(
        dict, _NUMBERS,
        "k=v,k2=v2 (or JSON) passed to the judge backend",
        "--judge-model-args", check=_kv, default="",
    )  # fmt: skip
    second_judge_model: str | None = _setting(
        None, _NUMBERS,
        "a second judge of the same answers: results add its number and the two judges' "
        "agreement (Cohen's kappa, Krippendorff's alpha); the task's number stays the first's",
        "--second-judge-model", check=_OPTIONAL_TEXT,
    )  # fmt: skip
    second_judge_model_args: dict[str, Any] = _setting(
        dict, _NUMBERS,
        "k=v,k2=v2 (or JSON) passed to the second judge backend",
        "--second-judge-model-args", check=_kv, default="",
    )  # fmt: skip
    unclosed_thinking: str = _setting(
        "empty", _NUMBERS,
        "a generation whose thinking never closed is scored as an empty answer (empty), as "
        "lm-eval scores it, the unfinished thought (keep), or fails its task (fail); "
        "docs/reasoning-models.md (default empty)",
        "--unclosed-thinking", check=_choice(UNCLOSED_THINKING),
        metavar=_options(UNCLOSED_THINKING),
    )  # fmt: skip
    sandbox: SandboxMode = _setting(
        "auto", _NUMBERS,
        "where model-written code runs: auto (bubblewrap namespaces; refused where they "
        "cannot start), bwrap, docker (needs --sandbox-image), rlimits (limits only: no "
        "network or file isolation), none (assay.sandbox.policy.ISOLATION)",
        "--sandbox", check=_choice(MODES), metavar=_options(MODES),
    )  # fmt: skip
    sandbox_image: str | None = _setting(
        None, _NUMBERS,
        "docker: the image programs run in (it must hold python3)",
        "--sandbox-image", check=_OPTIONAL_TEXT,
    )  # fmt: skip
    seed: Seeds = _setting(
        DEFAULT_SEEDS, _IDENTITY,
        "lm-eval's seeds: Python's random, numpy, torch (also sampled generations and sampled "
        "judgements) and few-shot selection; one number sets all four, None leaves one unset "
        "(default 0,1234,1234,1234, as lm-eval)",
        "--seed", check=parse_seeds,
        metavar="N|PYTHON,NUMPY,TORCH,FEWSHOT",
    )  # fmt: skip
    log_samples: bool = _setting(
        False, _FILES,
        "write a samples file per task (needs --output-path or --output-dir)",
        "--log-samples", "-s", check=_switch, action="store_true",
    )  # fmt: skip
    log_samples_reasoning: str = _setting(
        "full", _FILES,
        "what samples files keep of each generation's thinking: its text (full), its length in "
        "characters, or nothing (default full)",
        "--log-samples-reasoning", check=_choice(SAMPLES_REASONING),
        metavar=_options(SAMPLES_REASONING),
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
        "--overwrite", check=_switch, action="store_true",
    )  # fmt: skip
    cache: str | Path | bool | None = _setting(
        None, _NOTHING,
        "response cache file (default OUTPUT_DIR/cache.sqlite; from Python, False for none)",
        "--cache",
    )  # fmt: skip
    confirm_run_unsafe_code: bool = _setting(
        False, _NOTHING,
        "allow tasks that execute model-written code",
        "--confirm-run-unsafe-code", check=_switch, action="store_true",
    )  # fmt: skip
    sandbox_workers: int | None = _setting(
        None, _NOTHING,
        "model-written programs run at once (default one per CPU)",
        "--sandbox-workers", check=_NO_FEWER_THAN_ONE,
    )  # fmt: skip
    dataset_loading_processes: int = _setting(
        4, _NOTHING, "datasets loaded in parallel before the model is built",
        check=_at_least(1, "must be 1 or more"),
    )  # fmt: skip
    show_progress: bool = _setting(
        True, _NOTHING,
        "no progress display at all (transformers' and datasets' bars included)",
        "--no-progress", check=_switch, action="store_false",
    )  # fmt: skip
    executor: str = _setting(
        "local", _NOTHING,
        "where requests run: this process (local), or Ray actors holding model replicas",
        "--executor", check=_choice(EXECUTORS), metavar=_options(EXECUTORS),
        executor=True,
    )  # fmt: skip
    replicas: int | None = _setting(
        None, _NOTHING,
        "ray: model replicas (default one per GPU of the cluster, one without GPUs)",
        "--replicas", check=_NO_FEWER_THAN_ONE, executor=True,
    )  # fmt: skip
    gpus_per_replica: float | None = _setting(
        None, _NOTHING,
        "ray: GPUs per replica, e.g. the vLLM tensor-parallel size (default 1, 0 without GPUs)",
        "--gpus-per-replica", check=_optional(_gpus), executor=True,
    )  # fmt: skip
    ray_address: str | None = _setting(
        None, _NOTHING,
        "ray: cluster to join, e.g. auto or ray://head:10001 (default a local Ray instance)",
        "--ray-address", check=_OPTIONAL_TEXT, executor=True,
    )  # fmt: skip
    batch_api: bool = _setting(
        False, _NOTHING,
        "send API requests through the provider's batch API (openai-chat, openai-completions, "
        "anthropic-chat): half price, answered within 24 h; a re-run follows the batches "
        "already submitted (docs/api-models.md)",
        "--batch-api", check=_switch, action="store_true",
    )  # fmt: skip
    batch_failed: str = _setting(
        "resubmit", _NOTHING,
        "--batch-api: requests that an earlier run's batches left unanswered (the batch "
        "failed, expired or was cancelled, or refused them) are submitted again (resubmit), "
        "or reported as failed without being sent (stop) (default resubmit)",
        "--batch-failed", check=_choice(BATCH_FAILED), metavar=_options(BATCH_FAILED),
    )  # fmt: skip
    max_cost: float | None = _setting(
        None, _NOTHING,
        "stop before the run's API requests (model and judges) would cost more than USD; "
        "answers so far stay in the cache, and a re-run with a larger budget continues "
        "(needs the models' prices: docs/api-models.md)",
        "--max-cost", check=_optional(_usd), metavar="USD",
    )  # fmt: skip
    log_to: list[str] = _setting(
        list, _NOTHING,
        "log the finished run to mlflow, wandb, trackio or hub (comma separated or "
        "repeatable; each needs its extra: pip install 'assay[mlflow]' ...; needs --output-path "
        "or --output-dir)",
        "--log-to", check=_names, action="append", default=[], metavar="TRACKER",
    )  # fmt: skip
    log_to_args: dict[str, Any] = _setting(
        dict, _NOTHING,
        "tracker settings k=v,...: name (default the output dir's name), project, "
        "tracking_uri (mlflow), entity (wandb), group (wandb, trackio), space_id (trackio), "
        "repo=ORG/NAME, private (hub)",
        "--log-to-args", check=_kv, default="",
    )  # fmt: skip

    def __post_init__(self) -> None:
        # Every value, however it was given, becomes the setting's value or is refused here.
        for spec in fields(self):
            check = spec.metadata["setting"].check
            if check is not None:
                setattr(self, spec.name, check(getattr(self, spec.name), where(spec.name)))


def parse_samples(value: Any, flag: str = "--samples") -> dict[str, list[int]] | None:
    """--samples as given: a JSON object, or the path of a file holding one (lm-eval's forms),
    each task mapped to a list of doc ids."""
    if value is None:
        return None
    parsed = value if isinstance(value, dict) else _samples_json(value, flag)
    for name, ids in parsed.items():
        if not isinstance(ids, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids
        ):
            raise ConfigError(
                f"{flag}: {name!r} must map to a list of doc ids (whole numbers >= 0), got {ids!r}."
            )
    return parsed


def _samples_json(value: Any, flag: str) -> dict[str, Any]:
    import json

    if not isinstance(value, str):
        raise ConfigError(f"{flag} {value!r}: give a dict, a JSON object or a JSON file's path.")
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


def parse_cluster_by(value: Any, flag: str = "--cluster-by") -> dict[str, str]:
    """--cluster-by values, each "task=field" (or several, comma separated), as a dict."""
    if value is None:
        return {}
    if isinstance(value, dict):
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise ConfigError(f"{flag} {value!r}: map task names to field names (strings).")
        return dict(value)
    out: dict[str, str] = {}
    for part in _names(value, flag):
        task, sep, key = (s.strip() for s in part.partition("="))
        if not sep or not task or not key:
            raise ConfigError(
                f"{flag} {part.strip()!r}: expected TASK=FIELD, e.g. race=article "
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
