"""RunSettings: everything a benchmark run needs besides its tasks, with every default in one place.

`assay run`'s flags take their defaults from these fields (the CLI tests check that each field
has its flag), and `evaluate()`'s keywords are these fields. The module is import-light: the
CLI reads it to build `--help`.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from assay.errors import ConfigError

if TYPE_CHECKING:
    from assay.models.base import LM, BackendLike
    from assay.sandbox import SandboxMode

DEFAULT_FEWSHOT_SEED = 1234
"""lm-eval's default few-shot seed, so few-shot prompts match its runs."""

SEED_FIX = (
    "give one whole number (it seeds all four), or four comma-separated values "
    "python,numpy,torch,fewshot, each a whole number or None (lm-eval's default 0,1234,1234,1234)"
)


class Seeds(NamedTuple):
    """lm-eval's four seeds (its --seed python,numpy,torch,fewshot); None leaves one unset."""

    random: int | None = 0
    """Python's `random` module, seeded before tasks load (lm-eval's random_seed)."""
    numpy: int | None = 1234
    """numpy's global generator (lm-eval's numpy_seed)."""
    torch: int | None = 1234
    """torch's global generator (lm-eval's torch_seed), and the seed of sampled generations and
    sampled judgements (lm-eval's hf backend samples from torch's generator); None: unseeded."""
    fewshot: int | None = DEFAULT_FEWSHOT_SEED
    """Few-shot selection (lm-eval's fewshot_seed); None: unseeded, as lm-eval's
    `random.Random(None)`."""


UNCLOSED_THINKING = ("empty", "keep", "fail")
"""The choices of --unclosed-thinking (RunSettings.unclosed_thinking)."""
SAMPLES_REASONING = ("full", "length", "none")
"""The choices of --log-samples-reasoning (RunSettings.log_samples_reasoning)."""

DEFAULT_SEEDS = Seeds()
"""lm-eval's default --seed 0,1234,1234,1234."""

SEED_KEYS = ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed")
"""The four seeds' keys in results.json's config (lm-eval's names), in Seeds order."""


def parse_seeds(value: Any, flag: str = "--seed") -> Seeds:
    """lm-eval's --seed forms: one integer for all four seeds, or "python,numpy,torch,fewshot"
    (a string, or a list from a YAML config) where "None" leaves that seed unset, and None
    leaves all four unset. Three values take the fewshot seed from the default, as lm-eval does
    (with a note on stderr)."""
    if isinstance(value, Seeds):
        return value
    if value is None:  # lm-eval's `seed: null`: nothing seeded
        return Seeds(None, None, None, None)
    if isinstance(value, bool):
        raise ConfigError(f"{flag} {value!r}: not a seed; {SEED_FIX}.")
    if isinstance(value, int):
        return Seeds(value, value, value, value)
    items = list(value) if isinstance(value, list | tuple) else str(value).split(",")
    parsed = [_seed_value(item, value, flag) for item in items]
    if len(parsed) == 1:
        return Seeds(*(parsed * 4))
    if len(parsed) == 3:
        import sys

        print(
            f"{flag} {_shown(value)}: three seeds given (python, numpy, torch); the fewshot seed "
            f"keeps its default {DEFAULT_FEWSHOT_SEED}, as in lm-eval.",
            file=sys.stderr,
        )
        parsed.append(DEFAULT_FEWSHOT_SEED)
    if len(parsed) != 4:
        raise ConfigError(f"{flag} {_shown(value)}: {len(parsed)} values; {SEED_FIX}.")
    return Seeds(parsed[0], parsed[1], parsed[2], parsed[3])


def _shown(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def _seed_value(item: Any, whole: Any, flag: str) -> int | None:
    if item is None:
        return None
    if isinstance(item, int) and not isinstance(item, bool):
        return item
    text = str(item).strip()
    if text.lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise ConfigError(
            f"{flag} {_shown(whole)}: {text!r} is not a whole number or None; {SEED_FIX}."
        ) from None


@dataclass
class RunSettings:
    """Everything a run needs besides the tasks (the `assay run` flags, as values)."""

    model: str | LM | BackendLike = "hf"
    """Backend name (hf, vllm, openai-completions, openai-chat, dummy, replay), an LM object, or
    any object with LM's request methods and identity (see `assay.models.base.BackendLike`)."""
    model_args: dict[str, Any] = field(default_factory=dict)
    """Backend arguments (--model-args)."""
    num_fewshot: int | None = None
    """Few-shot examples per doc; None keeps each task's default."""
    limit: int | float | None = None
    """First N docs per task; a value below 1 is a fraction of the docs."""
    samples: dict[str, list[int]] | None = None
    """Doc ids to run per task name (lm-eval's --samples); tasks not named run every doc.
    Excludes `limit`."""
    batch_size: int | str | None = None
    """Rows per batch or "auto"; None leaves it to the backend (or --model-args)."""
    device: str | None = None
    """cpu, cuda, cuda:N, mps; None leaves it to the backend."""
    batch_api: bool = False
    """Send API requests through the provider's batch API (OpenAI's Batch API, Anthropic's
    Message Batches): answers within 24 h at half price. Needs output_dir or cache, where
    submitted batches are recorded so that a re-run never pays for them twice."""
    output_dir: str | Path | None = None
    """Folder for results.json (and samples files); None writes nothing."""
    overwrite: bool = False
    """Let a run replace a different earlier run's results in output_dir (else refused; the
    same run resumes)."""
    log_samples: bool = False
    """Write samples_<task>.jsonl per task (needs output_dir)."""
    predict_only: bool = False
    """Log the model's answers without computing metrics (lm-eval's bypass metric); implies
    log_samples."""
    log_samples_reasoning: str = "full"
    """What samples files keep of each generation's thinking: "full" (the text), "length"
    (its length in characters) or "none"."""
    unclosed_thinking: str = "empty"
    """What is scored for a generation whose thinking never closed (cut by max_gen_toks or by
    a thinking budget): "empty" (an empty answer), "keep" (what lm-eval scores: the unfinished
    thought, by its split(think_end)[-1] rule) or "fail" (the task fails, naming the docs)."""
    seed: Seeds = DEFAULT_SEEDS
    """lm-eval's four seeds: Python's random, numpy, torch (also sampled generations), few-shot
    selection. evaluate() and --seed take lm-eval's forms (see parse_seeds)."""
    apply_chat_template: bool = False
    """Render prompts with the model's chat template."""
    system_instruction: str | None = None
    """System prompt placed before the task description."""
    fewshot_as_multiturn: bool | None = None
    """Few-shot examples as chat turns; None means yes when a chat template is applied."""
    gen_kwargs: dict[str, Any] = field(default_factory=dict)
    """Generation settings merged into every generative task (they win over the task's)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Merged into every task's metadata (lm-eval's --metadata), which reaches custom dataset
    functions, e.g. {"max_seq_lengths": [4096]}."""
    cluster_by: dict[str, str] = field(default_factory=dict)
    """Per task name: the dataset field whose value groups docs that share a context (wins over
    the task's own cluster_key); results then carry a clustered stderr."""
    bootstrap_iters: int = 100_000
    """Bootstrap iterations for the stderr of non-mean aggregations (0 disables)."""
    cache: str | Path | bool | None = None
    """Response cache path; None means OUT/cache.sqlite when an output dir is given; False none."""
    confirm_run_unsafe_code: bool = False
    """Allow tasks that execute model-written code."""
    sandbox: SandboxMode = "auto"
    """Where model-written code runs: auto (bubblewrap, or a refusal where no namespace
    sandbox starts), bwrap, docker, rlimits (limits only: no network or file isolation) or
    none. See assay.sandbox.policy.ISOLATION."""
    sandbox_image: str | None = None
    """The container image of --sandbox docker (it must hold python3)."""
    sandbox_workers: int | None = None
    """Model-written programs run at once; None means one per CPU."""
    dataset_loading_processes: int = 4
    """Datasets loaded in parallel before the model is built."""
    show_progress: bool = True
    """Show progress bars (on a terminal)."""
    executor: str = "local"
    """Where requests run: "local" (this process) or "ray" (a pool of model replicas)."""
    replicas: int | None = None
    """Ray: model replicas (default one per GPU, or one without GPUs)."""
    gpus_per_replica: float | None = None
    """Ray: GPUs per replica (default 1 with GPUs, else 0)."""
    ray_address: str | None = None
    """Ray: cluster to join (default a local Ray instance)."""
    judge_model: str | None = None
    """Backend that grades answers for judge metrics (judge_score, judge_pairwise,
    judge_correct, judge_rubric); any backend name. Needed only by tasks with judge metrics
    that name no judge of their own."""
    judge_model_args: dict[str, Any] = field(default_factory=dict)
    """Backend arguments of the judge model (--judge-model-args)."""
    second_judge_model: str | None = None
    """A second judge grading the same answers: results add its number and the agreement of
    the two judges (Cohen's kappa, Krippendorff's alpha); the task's number stays the first's."""
    second_judge_model_args: dict[str, Any] = field(default_factory=dict)
    """Backend arguments of the second judge model (--second-judge-model-args)."""
    max_cost: float | None = None
    """USD this run's API requests may cost at most (the model's and the judges'); the run
    stops before it would spend more, keeping its answers in the response cache. None: no limit.
    Needs the models' prices (their price_in/price_out args or the bundled table)."""
    log_to: list[str] = field(default_factory=list)
    """Trackers the finished run is logged to: mlflow, wandb, trackio, hub (needs output_dir)."""
    log_to_args: dict[str, Any] = field(default_factory=dict)
    """Tracker settings: name (the run's name; default the output dir's), project,
    tracking_uri (mlflow), entity (wandb), group (wandb, trackio), space_id (trackio), repo and
    private (hub)."""

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
