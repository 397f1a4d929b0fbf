"""BFCL v4 (Berkeley Function Calling Leaderboard): the categories that run offline.

Each category is two tasks: `bfcl_fc_<category>` offers the entry's functions as tools (a
backend that accepts tools answers with tool calls), `bfcl_prompt_<category>` puts them in
bfcl-eval's system prompt and reads the calls from the answer's text. Entries, functions,
ground truth, the prompt-mode system prompt and the tool schemas all come from the installed
`bfcl-eval` package (its data files and helpers, never copies); answers are scored by its
checker (`assay.metrics.bfcl`). Groups aggregate as BFCL's leaderboard does.

Categories that need the network (web search) or a memory backend are listed and refused with
the reason. The multi-turn categories are agent tasks: `bfcl_multi_turn`.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

from assay.doc import Doc, OutputType
from assay.errors import ConfigError
from assay.metrics.bfcl import bfcl_eval_module
from assay.metrics.bfcl_multi_turn import MULTI_TURN
from assay.requests.tools import ToolSpec, Turn
from assay.tasks.config import MetricSpec, TaskConfig
from assay.tasks.lm_eval_yaml import GroupConfig

NON_LIVE_SIMPLE = ("simple_python", "simple_java", "simple_javascript")
NON_LIVE_AST = (*NON_LIVE_SIMPLE, "multiple", "parallel", "parallel_multiple")
NON_LIVE = (*NON_LIVE_AST, "irrelevance")
LIVE_AST = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
LIVE = (*LIVE_AST, "live_irrelevance", "live_relevance")
OFFLINE = (*NON_LIVE, *LIVE)
"""The single-turn categories, scored by bfcl-eval's AST and relevance checkers."""

REFUSED = {
    "web_search_base": "it searches the web (SerpAPI), which an offline run cannot reach",
    "web_search_no_snippet": "it searches the web (SerpAPI), which an offline run cannot reach",
    "memory_kv": "its memory backends are built from earlier conversations of the same model",
    "memory_vector": "its memory backends are built from earlier conversations of the same model",
    "memory_rec_sum": "its memory backends are built from earlier conversations of the same model",
}
"""Categories assay lists but does not run, with the reason."""

MODES = ("fc", "prompt")


def _entries(category: str) -> list[dict[str, Any]]:
    """A category's entries as bfcl-eval gives them: `function` with the language hints its
    generation adds, `checker_function` without them (as its evaluation loads them), and the
    ground truth, aligned by position as its evaluation aligns them."""
    utils = bfcl_eval_module("bfcl_eval.utils")
    asked = utils.load_dataset_entry(category)
    checked = utils.load_dataset_entry(
        category, include_prereq=False, include_language_specific_hint=False
    )
    truths: list[Any] = (
        [None] * len(asked)
        if "relevance" in category
        else [t["ground_truth"] for t in utils.load_ground_truth_entry(category)]
    )
    if not len(asked) == len(checked) == len(truths):
        raise ConfigError(
            f"bfcl {category}: bfcl-eval gave {len(asked)} entries, {len(checked)} checker "
            f"entries and {len(truths)} ground truths; reinstall bfcl-eval==2026.3.23."
        )
    return [
        {
            "id": entry["id"],
            "question": entry["question"],
            "function": entry["function"],
            "checker_function": check["function"],
            "ground_truth": truth,
        }
        for entry, check, truth in zip(asked, checked, truths, strict=True)
    ]


def _loader(category: str) -> Any:
    def load(**_: Any) -> dict[str, list[dict[str, Any]]]:
        return {"test": _entries(category)}

    return load


def fc_tools(functions: list[dict[str, Any]]) -> tuple[ToolSpec, ...]:
    """An entry's functions as tools, converted by bfcl-eval for an OpenAI chat model (types
    mapped to JSON Schema, "." in names written "_")."""
    utils = bfcl_eval_module("bfcl_eval.model_handler.utils")
    mappings = bfcl_eval_module("bfcl_eval.constants.type_mappings")
    enums = bfcl_eval_module("bfcl_eval.constants.enums")
    tools = utils.convert_to_tool(
        functions, mappings.GORILLA_TO_OPENAPI, enums.ModelStyle.OPENAI_COMPLETIONS
    )
    return tuple(
        ToolSpec.of(
            t["function"]["name"], t["function"].get("description", ""), t["function"]["parameters"]
        )
        for t in tools
    )


def _prompt(mode: str, category: str) -> Any:
    def prompt(row: dict[str, Any], task_name: str) -> Doc:
        messages = copy.deepcopy(row["question"][0])
        if mode == "prompt":
            utils = bfcl_eval_module("bfcl_eval.model_handler.utils")
            messages = utils.system_prompt_pre_processing_chat_model(
                messages, row["function"], row["id"]
            )
        conversation = tuple(Turn(m["role"], m["content"]) for m in messages)
        users = [turn.content for turn in conversation if turn.role == "user"]
        truth = row["ground_truth"]
        return Doc(
            query=users[-1] if users else "",
            choices=[json.dumps(truth) if truth is not None else ""],
            gold_index=0,
            conversation=conversation,
            tools=fc_tools(row["function"]) if mode == "fc" else (),
            specific={
                "category": category,
                "mode": mode,
                "functions": row["checker_function"],
                "ground_truth": truth,
            },
        )

    return prompt


def _check_installed() -> None:
    bfcl_eval_module("bfcl_eval.eval_checker.ast_eval.ast_checker")


def _refused(category: str) -> Any:
    def refuse() -> None:
        raise ConfigError(
            f"BFCL's {category} is not run by assay: {REFUSED[category]}. The offline "
            f"categories are {', '.join(OFFLINE)}, and in function-calling mode "
            f"{', '.join(MULTI_TURN)}."
        )

    return refuse


EXAMPLE_ROW: dict[str, Any] = {
    "id": "simple_python_example",
    "question": [[{"role": "user", "content": "What is the weather in Paris in celsius?"}]],
    "function": [
        {
            "name": "weather.get",
            "description": "The current weather of a city.",
            "parameters": {
                "type": "dict",
                "properties": {
                    "city": {"type": "string", "description": "The city."},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        }
    ],
    "ground_truth": [{"weather.get": {"city": ["Paris"], "unit": ["celsius", ""]}}],
}
"""A BFCL-shaped entry of our own, for `assay tasks show` (the real ones come from bfcl-eval)."""
EXAMPLE_ROW["checker_function"] = EXAMPLE_ROW["function"]


def _task(mode: str, category: str) -> TaskConfig:
    runnable = category in OFFLINE
    return TaskConfig(
        name=f"bfcl_{mode}_{category}",
        prompt_function=_prompt(mode, category),
        dataset_loader=_loader(category),
        evaluation_splits=("test",),
        metrics=[MetricSpec("bfcl_accuracy")],
        output_type=OutputType.GENERATE_UNTIL,
        # bfcl-eval asks at temperature 0 and leaves the length to the provider: room for the
        # longest parallel calls, not a cut.
        generation_kwargs={
            "until": [],
            "do_sample": False,
            "temperature": 0.0,
            "max_gen_toks": 4096,
        },
        num_fewshots=0,
        num_fewshots_fixed=True,
        version=4.0,
        validate_hook=_check_installed if runnable else _refused(category),
        example_rows=[EXAMPLE_ROW],
    )


TASKS_TABLE = [_task(mode, category) for mode in MODES for category in (*OFFLINE, *REFUSED)]


def _groups(mode: str) -> list[GroupConfig]:
    """BFCL's leaderboard parts as groups computed as bfcl-eval computes them: non-live simple,
    the unweighted mean of its three languages; live AST, its four categories weighted by
    size; irrelevance, the unweighted mean of the non-live and live ones (lm-eval's group
    intervals: √(Σ se²)/k unweighted, pooled by size). Non-live AST (an unweighted mean over
    non-live simple and three categories) is computed by `leaderboard_scores` from its
    categories, its interval by `leaderboard_stderrs` (the multi-turn and overall groups:
    `bfcl_multi_turn.GROUPS`)."""
    name = f"bfcl_{mode}"

    def group(group: str, tasks: list[str], by_size: bool) -> GroupConfig:
        return GroupConfig(
            name=group,
            tasks=tasks,
            aggregate_metric_list=[{"metric": "bfcl_accuracy", "weight_by_size": by_size}],
        )

    return [
        group(f"{name}_non_live_simple", [f"{name}_{c}" for c in NON_LIVE_SIMPLE], False),
        group(f"{name}_live", [f"{name}_{c}" for c in LIVE_AST], True),
        group(
            f"{name}_irrelevance_total",
            [f"{name}_irrelevance", f"{name}_live_irrelevance"],
            False,
        ),
        leaderboard_group(f"{name}_non_live", mode, NON_LIVE_AST, "non_live"),
    ]


def leaderboard_group(name: str, mode: str, categories: tuple[str, ...], part: str) -> GroupConfig:
    """A group over `categories` whose bfcl_accuracy is BFCL's leaderboard `part`
    (`leaderboard_scores`), computed from its tasks' accuracies and sizes, with its standard
    error from theirs (`leaderboard_stderrs`)."""
    tasks = [f"bfcl_{mode}_{c}" for c in categories]

    def by_category(values: list[Any], sizes: list[int]) -> dict[str, tuple[Any, int]]:
        if len(values) != len(categories):
            raise ConfigError(
                f"group {name}: bfcl_accuracy came from {len(values)} of its "
                f"{len(categories)} tasks ({', '.join(tasks)}); run them all."
            )
        return {c: (v, n) for c, v, n in zip(categories, values, sizes, strict=True)}

    def aggregate(values: list[float], sizes: list[int], _: bool) -> float:
        return leaderboard_scores(by_category(values, sizes), dict.fromkeys(LIVE_AST, 0))[part]

    def stderr(values: list[float], sizes: list[int], stderrs: list[Any]) -> float | str:
        if any(isinstance(se, bool) or not isinstance(se, int | float) for se in stderrs):
            return "N/A"  # a category without one (one doc, --bootstrap_iters 0): none here
        errors = by_category([float(se) for se in stderrs], sizes)
        return leaderboard_stderrs(errors, dict.fromkeys(LIVE_AST, 0))[part]

    return GroupConfig(
        name=name,
        tasks=tasks,
        aggregate_metric_list=[
            {"metric": "bfcl_accuracy", "aggregation": aggregate, "stderr": stderr}
        ],
    )


GROUPS = [group for mode in MODES for group in _groups(mode)]

OVERALL_WEIGHTS = {"non_live": 10, "live": 10, "irrelevance": 10, "multi_turn": 30, "agentic": 40}
"""bfcl-eval 2026.3.23's weights of the overall score (eval_runner_helper)."""


def leaderboard_scores(
    accuracy: dict[str, tuple[float, int]], sizes: dict[str, int] | None = None
) -> dict[str, float]:
    """BFCL's leaderboard aggregates from per-category (accuracy, entries scored), as bfcl-eval
    computes them: a category not run counts as accuracy 0 over all its entries (`sizes`, by
    default read from bfcl-eval where a part weighs by size), so an overall score without multi-turn weighs it (30 %) as 0,
    and agentic (web search and memory, 40 %, which assay does not run) always counts 0, as
    bfcl-eval's own overall does."""

    def score(category: str) -> tuple[float, int]:
        if category in accuracy:
            return accuracy[category]
        if sizes is not None and category in sizes:
            return 0.0, sizes[category]
        # Only a size-weighted part (live) reads the size of a category not run.
        return 0.0, len(_entries(category)) if category in LIVE_AST else 0

    def unweighted(*parts: tuple[float, int]) -> tuple[float, int]:
        return sum(a for a, _ in parts) / len(parts), sum(n for _, n in parts)

    def weighted(*parts: tuple[float, int]) -> tuple[float, int]:
        total = sum(n for _, n in parts)
        return (sum(a * n for a, n in parts) / total if total else 0.0), total

    simple = unweighted(*(score(c) for c in NON_LIVE_SIMPLE))
    non_live = unweighted(simple, *(score(c) for c in NON_LIVE_AST[3:]))
    live = weighted(*(score(c) for c in LIVE_AST))
    irrelevance = unweighted(score("irrelevance"), score("live_irrelevance"))
    multi_turn = unweighted(*(score(c) for c in MULTI_TURN))
    parts = {
        "non_live": non_live[0],
        "live": live[0],
        "irrelevance": irrelevance[0],
        "multi_turn": multi_turn[0],
    }
    overall = sum(parts.get(k, 0.0) * w for k, w in OVERALL_WEIGHTS.items())
    return {
        "non_live_simple": simple[0],
        **parts,
        "relevance": score("live_relevance")[0],
        "overall": overall / sum(OVERALL_WEIGHTS.values()),
    }


def leaderboard_stderrs(
    stderr: dict[str, tuple[float, int]], sizes: dict[str, int] | None = None
) -> dict[str, float]:
    """Standard errors of `leaderboard_scores`' parts from per-category (standard error,
    entries scored). Every part is a fixed linear combination of category accuracies, each
    over its own entries (independent), so its variance is the sum over categories of
    (weight x stderr)^2; each category's weight in each part is read off `leaderboard_scores`
    itself (that category at accuracy 1, the others at 0, the same sizes). A category not
    run is the constant 0: it adds no variance."""
    zero = {category: (0.0, n) for category, (_, n) in stderr.items()}
    variance: dict[str, float] = {}
    for category, (se, n) in stderr.items():
        weights = leaderboard_scores({**zero, category: (1.0, n)}, sizes)
        for part, weight in weights.items():
            variance[part] = variance.get(part, 0.0) + (weight * se) ** 2
    return {part: math.sqrt(v) for part, v in variance.items()}
