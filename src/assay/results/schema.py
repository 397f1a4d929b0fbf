"""The one typed schema of assay's results: results.json, its task and group entries, the
samples records and the run's provenance.

The writer produces these shapes; `assay compare`, `assay report` and the readers of run
folders (`results/readers.py`) read them. results.json keeps lm-eval 0.4.13's layout (every key
lm-eval writes has the same name and meaning), so a results file from either harness reads with
the same types; assay adds `provenance` and `assay` (keys lm-eval ignores).

Task and group entries, and samples records, carry one key per metric besides the fixed keys
typed here. A TypedDict cannot declare such keys, so they are documented on each type and read
through the helpers at the end of this module (`metric_key`, `metric_columns`, ...), never by
splitting strings at the call site.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any, Literal, NotRequired, TypedDict

Stderr = float | Literal["N/A"]
"""A standard error, or lm-eval's "N/A" when it is not computed."""

NA: Literal["N/A"] = "N/A"


# ------------------------------------------------------------------ results.json entries
class TaskEntry(TypedDict):
    """A task's entry under `results` (lm-eval 0.4.12+ layout).

    Besides these keys, for each metric `m` scored under filter `f`:

    - `"m,f"`: the task's score (a float, or whatever the aggregation returns);
    - `"m_stderr,f"`: its standard error (float) or "N/A";
    - `"m_stderr_clustered,f"` (assay only, when the task has a cluster key): the standard
      error clustered by that key (Miller 2024), float or "N/A".
    - `"m_stderr_corrected,f"` (assay only, metrics another harness scores whose standard
      error that harness gets wrong, `Aggregation.peer_stderr`): the right one, where
      `"m_stderr,f"` is that harness's value (assay.compat.<peer> says how it is wrong).
    """

    name: str
    """The task's name."""
    alias: str
    """The name shown in tables (the task's alias, else its name)."""
    sample_len: int
    """Docs scored."""


class GroupEntry(TaskEntry):
    """A group's entry under `results` and `groups`: the metric keys of its aggregate metrics
    (size-weighted or plain means of its leaf tasks, pooled stderr), as in TaskEntry."""

    sample_count: dict[str, int]
    """Per "metric,filter" key: the docs behind the group's value (sum over leaf tasks)."""


class SampleCount(TypedDict):
    """`n-samples` of a task."""

    original: int
    """Docs in the evaluation split."""
    effective: int
    """Docs evaluated (after --limit / --samples)."""


class RunConfig(TypedDict, total=False):
    """`config`: how the run was invoked (lm-eval's keys; assay adds `model_identity`)."""

    model: str
    """Backend name as given (hf, vllm, dummy, ...)."""
    model_args: dict[str, Any] | str
    """--model-args as given (lm-eval 0.4.13 records a dict)."""
    batch_size: int | str | None
    batch_sizes: list[int]
    """Sizes an automatic batch size picked, in order."""
    device: str | None
    use_cache: str | None
    limit: int | float | None
    bootstrap_iters: int
    gen_kwargs: dict[str, Any]
    """--gen-kwargs, merged into every generative task."""
    random_seed: int | None
    """Python's random module (--seed's first value; None: not seeded)."""
    numpy_seed: int | None
    torch_seed: int | None
    """Also the seed of sampled generations."""
    fewshot_seed: int | None
    model_identity: dict[str, Any]
    """assay: the backend's identity (what its response cache keys on)."""
    model_num_parameters: int
    """lm-eval, hf backend: parameter count."""
    model_dtype: str
    """lm-eval, hf backend: weights dtype."""
    model_revision: str
    """lm-eval, hf backend: --model-args revision."""
    model_sha: str
    """lm-eval, hf backend: resolved commit of the weights on the hub."""


# ------------------------------------------------------------------ provenance
class LibraryVersions(TypedDict):
    """Versions of what produced the numbers (None: not installed)."""

    assay: str
    python: str
    torch: str | None
    transformers: str | None
    datasets: str | None
    vllm: str | None
    numpy: str | None


class BackendIdentity(TypedDict, total=False):
    """The backend and everything that identifies the model behind it.

    Keys a backend cannot know are absent (an API model has no parameter count); a backend may
    add keys of its own (they are compared like the rest).
    """

    backend: str
    """Backend name: hf, vllm, openai-chat, dummy, ..."""
    model: str | None
    """Model id on the hub, local path, or served model name."""
    revision: str | None
    """Revision asked for (branch, tag or commit)."""
    commit_sha: str | None
    """Commit the revision resolved to, when the model came from the hub."""
    dtype: str | None
    num_parameters: int | None
    tokenizer: str | None
    """Tokenizer name or path (the model's own when not given separately)."""
    chat_template_sha256: str | None
    """sha256 of the chat template text (None: the model has none)."""
    max_length: int | None
    """Context length the backend truncates to."""
    add_bos_token: bool | None
    identity: dict[str, Any]
    """The backend's full identity: everything its response cache keys on."""


class TaskProvenance(TypedDict):
    """Where a task's docs came from and what was evaluated."""

    dataset_path: str | None
    """Hub id, builder name (json, csv) or local path of the dataset."""
    dataset_name: str | None
    """Configuration (subset) name."""
    dataset_revision: str | None
    """Revision asked for (None: the hub's default branch)."""
    split: str | None
    """Split the docs were taken from."""
    docs: int
    """Docs evaluated."""
    docs_fingerprint: str
    """`docs_fingerprint()` of the docs evaluated: equal fingerprints, equal docs."""
    task_hash: str
    """sha256 of the task's configuration (`configs` entry without its source path): equal
    hashes, same prompts, targets and metrics for the same docs."""
    num_fewshot: int
    cluster_key: str | None
    """Doc field whose value groups docs that share a context (None: docs independent)."""
    sandbox: NotRequired[str]
    """Tasks that run model-written code only: the sandbox it ran in (bwrap, rlimits, none,
    docker:IMAGE); a pass rate can depend on it, so `assay compare` shows a difference."""
    fewshot_replaced_self: NotRequired[list[int]]
    """Doc ids whose own row lm-eval's few-shot draw picked and assay replaced by another row
    (their prompts differ from lm-eval's; --fewshot-keep-self keeps them)."""


class Provenance(TypedDict):
    """What produced a run, enough to tell whether two runs' numbers are comparable."""

    versions: LibraryVersions
    backend: BackendIdentity
    settings: dict[str, Any]
    """Every run setting that changes outputs (limit, samples, gen_kwargs, chat template, system
    instruction, few-shot as multiturn, predict_only, ...), by RunSettings field name."""
    seeds: dict[str, int | None]
    """The four --seed values under results.json's config keys: random_seed, numpy_seed,
    torch_seed (also sampled generations), fewshot_seed."""
    tasks: dict[str, TaskProvenance]


class ResultsFile(TypedDict, total=False):
    """results.json. Keys lm-eval 0.4.13 writes keep its names and meanings; `provenance` and
    `assay` are assay's. Keys with a dash (`n-shot`, `n-samples`) are typed in the functional
    form below."""

    results: dict[str, TaskEntry | GroupEntry]
    """Every task and group, groups first."""
    groups: dict[str, GroupEntry]
    """Groups that aggregate metrics."""
    group_subtasks: dict[str, list[str]]
    """Direct children of each group."""
    configs: dict[str, dict[str, Any]]
    """Each task's configuration, as its YAML (or TaskConfig) declares it."""
    versions: dict[str, Any]
    higher_is_better: dict[str, dict[str, bool | None]]
    task_hashes: dict[str, str]
    """lm-eval's hash of a task's samples: sha256 over every line's doc, prompt and target
    hashes (only with --log-samples)."""
    config: RunConfig
    git_hash: str | None
    date: float
    transformers_version: str
    """lm-eval only."""
    lm_eval_version: str
    """lm-eval only."""
    chat_template_sha: str | None
    """lm-eval only: sha256 of the chat template applied (None without one)."""
    system_instruction: str | None
    fewshot_as_multiturn: bool | None
    chat_template_applied: bool
    """assay only."""
    provenance: Provenance
    """assay only."""
    assay: dict[str, Any]
    """assay only: timings, request and token counts, executor description, `run` (the
    tasks and settings that make two runs the same run; see run/resume.py) and, for tasks
    with judge metrics, `judges`: per task, each judge's model, model_args, named_by (the flag
    or the task that chose it), identity and `requests` (sent, unique, from_cache, computed);
    when the backend said how its generations ended, `generations`: per task and group,
    truncated_rate, unclosed_thinking_rate, reasoning token mean and p95, answer token mean,
    with their counts (results/generations.py)."""
    stderr_notes: dict[str, dict[str, str]]
    """assay only, present when a stderr is 0 or "N/A": per task or group, per stderr key, why
    no spread was measured (results/stderr_notes.py)."""
    total_evaluation_time_seconds: str


# The dashed keys of results.json (a class body cannot declare them).
DashedKeys = TypedDict(
    "DashedKeys",
    {
        "n-shot": dict[str, int],  # few-shot examples per task (groups: when all agree)
        "n-samples": dict[str, SampleCount],
    },
    total=False,
)


# ------------------------------------------------------------------ samples records
class SampleRecord(TypedDict, total=False):
    """One line of samples_<task>.jsonl: one doc under one filter (lm-eval's layout).

    Besides these keys, one key per name in `metrics` holds the doc's raw value of that metric
    (a number for metrics aggregated by mean; a pair or list for corpus-level metrics such as
    f1, bleu or perplexity, which aggregate over all docs).
    """

    doc_id: int
    """Index of the doc in the evaluation split."""
    doc: dict[str, Any]
    """The dataset row (after process_docs)."""
    target: str
    """str(doc_to_target(doc)); the gold index for multiple choice."""
    arguments: dict[str, dict[str, Any]]
    """Per request "gen_args_<i>": its arguments "arg_0", "arg_1", ... (context, continuation
    or generation settings)."""
    resps: list[Any]
    """Raw responses per request, per repeat (leaves as strings)."""
    filtered_resps: list[Any]
    """Filtered response per request (leaves as strings)."""
    filter: str
    """Name of the filter pipeline these values come from ("none" by default)."""
    metrics: list[str]
    """Names of the metric values recorded on this line."""
    doc_hash: str
    """sha256 of json.dumps(doc, indent=2, ensure_ascii=False)."""
    prompt_hash: str
    """sha256 of the first request's prompt (its context, or its text)."""
    target_hash: str
    """sha256 of target."""
    cluster: Any
    """assay only, when the task has a cluster key: the doc's value of that field, as
    `cluster_label` writes it."""
    executions: list[dict[str, Any]]
    """assay only, for tasks that run model-written code: per program, in the order of the
    responses, how its run ended: outcome (passed, failed, timed_out, killed_by_limit,
    blocked), detail (which limit, what was blocked), returncode, mode (the sandbox) and
    stderr_tail (the last 500 characters of stderr)."""
    generations: list[list[dict[str, Any] | None]]
    """assay only, for docs whose backend said how its generations ended: per request, per
    repeat, the generation's reasoning (or reasoning_chars, or neither: see
    --log-samples-reasoning), finish_reason, thinking_closed, reasoning_tokens and
    answer_tokens (null for an answer given as a plain string); resps hold the answers the
    filters saw."""


# ------------------------------------------------------------------ metric keys
STDERR_SUFFIX = "_stderr"
CLUSTERED_SUFFIX = "_stderr_clustered"
CORRECTED_SUFFIX = "_stderr_corrected"


def metric_key(metric: str, flt: str) -> str:
    """The key of a metric's score in a task or group entry: "metric,filter"."""
    return f"{metric},{flt}"


def stderr_key(metric: str, flt: str) -> str:
    """The key of a metric's standard error: "metric_stderr,filter"."""
    return f"{metric}{STDERR_SUFFIX},{flt}"


def corrected_stderr_key(metric: str, flt: str) -> str:
    """The key of assay's standard error beside another harness's wrong one:
    "metric_stderr_corrected,filter"."""
    return f"{metric}{CORRECTED_SUFFIX},{flt}"


def clustered_stderr_key(metric: str, flt: str) -> str:
    """The key of a metric's clustered standard error: "metric_stderr_clustered,filter"."""
    return f"{metric}{CLUSTERED_SUFFIX},{flt}"


_ENTRY_FIELDS = frozenset({"name", "alias", "sample_len", "sample_count"})


def metric_columns(entry: TaskEntry | GroupEntry | dict[str, Any]) -> list[tuple[str, str]]:
    """The (metric, filter) pairs scored in a task or group entry, in the entry's order
    (standard-error keys left out)."""
    columns = []
    for key in entry:
        if key in _ENTRY_FIELDS or "," not in key:
            continue
        metric, flt = key.split(",", 1)
        if metric.endswith((STDERR_SUFFIX, CLUSTERED_SUFFIX, CORRECTED_SUFFIX)):
            continue
        columns.append((metric, flt))
    return columns


def sample_metric_values(record: SampleRecord) -> dict[str, Any]:
    """A samples record's per-metric values, by metric name."""
    values: dict[str, Any] = record  # type: ignore[assignment]
    return {name: values[name] for name in record.get("metrics", []) if name in values}


def cluster_label(value: Any) -> Any:
    """A doc's cluster value as samples record it: as is, except a text longer than 100
    characters (a passage, a story: already in the doc) which becomes "sha256:" and its first
    16 hex digits. Equal values give equal labels, so docs cluster the same either way."""
    if isinstance(value, str) and len(value) > 100:
        return "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:16]
    return value


def docs_fingerprint(doc_hashes: Iterable[tuple[int, str]]) -> str:
    """`TaskProvenance.docs_fingerprint`: sha256 over "doc_id:doc_hash" lines in doc_id order.

    Computed the same way from a samples file (of either harness) as when the run recorded it,
    so runs that evaluated the same rows under the same ids have equal fingerprints.
    """
    digest = hashlib.sha256()
    for doc_id, doc_hash in sorted(doc_hashes):
        digest.update(f"{doc_id}:{doc_hash}\n".encode())
    return digest.hexdigest()
