"""`assay run`: evaluate a model on tasks. Its flags are the fields of RunSettings, with the
defaults RunSettings declares (one table: assay/settings.py)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from assay.backend_names import BUILTIN_BACKENDS
from assay.cli.lm_eval_flags import add_flags as add_lm_eval_flags
from assay.cli.lm_eval_flags import apply_flags as apply_lm_eval_flags
from assay.cli.lm_eval_flags import print_notes
from assay.errors import ConfigError
from assay.sandbox import MODES
from assay.settings import (
    SAMPLES_REASONING,
    UNCLOSED_THINKING,
    RunSettings,
    default,
    parse_cluster_by,
    parse_samples,
    parse_seeds,
    setting_names,
)
from assay.tasks.names import split_csv


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
    if text.startswith("auto:"):  # lm-eval's auto:N; run as auto (lm_eval_flags says why)
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


def add_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add the `run` command to the subcommands `sub`; returns its parser."""
    run = sub.add_parser("run", help="evaluate a model on tasks", parents=parents)
    run.set_defaults(handler=main)
    run.add_argument(
        "--config",
        "-c",
        default=None,
        help="YAML file of run flags (any flag, by its name: model_args, tasks, limit ...); "
        "flags on the command line win",
    )
    run.add_argument(
        "--model",
        "-m",
        default=default("model"),
        help=f"backend: {', '.join(BUILTIN_BACKENDS)}, or an installed plugin's name "
        f"(default {default('model')})",
    )
    run.add_argument(
        "--model-args", "-a", default="", help="k=v,k2=v2 (or JSON) passed to the backend"
    )
    run.add_argument(
        "--judge-model",
        default=default("judge_model"),
        help="backend that grades answers for judge metrics (judge_score, judge_pairwise, "
        "judge_correct, judge_rubric): hf, openai-chat, vllm, dummy, replay ...; a task that "
        "names its own judge_model uses that one",
    )
    run.add_argument(
        "--judge-model-args", default="", help="k=v,k2=v2 (or JSON) passed to the judge backend"
    )
    run.add_argument(
        "--second-judge-model",
        default=default("second_judge_model"),
        help="a second judge of the same answers: results add its number and the two judges' "
        "agreement (Cohen's kappa, Krippendorff's alpha)",
    )
    run.add_argument(
        "--second-judge-model-args",
        default="",
        help="k=v,k2=v2 (or JSON) passed to the second judge backend",
    )
    run.add_argument(
        "--tasks",
        "-t",
        action="append",
        help="task, group or tag names (comma separated; 'name|k' sets k shots); "
        "`assay tasks list` lists them",
    )
    run.add_argument(
        "--include-path",
        action="append",
        default=[],
        help="directory of lm-eval task YAMLs (repeatable)",
    )
    run.add_argument(
        "--custom-tasks",
        action="append",
        default=[],
        help="Python file defining TASKS_TABLE (repeatable)",
    )
    run.add_argument(
        "--num-fewshot",
        "-f",
        type=int,
        default=default("num_fewshot"),
        help="few-shot examples per doc",
    )
    run.add_argument(
        "--limit",
        "-L",
        type=_limit,
        default=default("limit"),
        help="first N docs per task (a value < 1 is a fraction)",
    )
    run.add_argument(
        "--samples",
        "-E",
        default=default("samples"),
        help="doc ids per task, as JSON or a JSON file: '{\"arc_easy\": [0, 5]}' (not with --limit)",
    )
    run.add_argument(
        "--batch-size", "-b", type=_batch, default=default("batch_size"), help="N or auto"
    )
    run.add_argument("--device", default=default("device"), help="cpu, cuda, cuda:0, mps ...")
    run.add_argument(
        "--batch-api",
        action="store_true",
        default=default("batch_api"),
        help="send API requests through the provider's batch API (openai-chat, "
        "openai-completions, anthropic-chat): half price, answered within 24 h; a re-run "
        "follows the batches already submitted (docs/api-models.md)",
    )
    run.add_argument(
        "--max-cost",
        type=_usd,
        default=default("max_cost"),
        metavar="USD",
        help="stop before the run's API requests (model and judges) would cost more than USD; "
        "answers so far stay in the cache, and a re-run with a larger budget continues "
        "(needs the models' prices: docs/api-models.md)",
    )
    run.add_argument(
        "--output-dir",
        "--output-path",
        "-o",
        default=default("output_dir"),
        help="write results.json (and samples) here",
    )
    run.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a different earlier run's results in --output-dir (the same run resumes)",
    )
    run.add_argument(
        "--log-samples", "-s", action="store_true", help="write samples_<task>.jsonl per task"
    )
    run.add_argument(
        "--predict-only",
        "-x",
        action="store_true",
        help="log the model's answers without computing metrics (implies --log-samples)",
    )
    run.add_argument(
        "--log-samples-reasoning",
        choices=list(SAMPLES_REASONING),
        default=default("log_samples_reasoning"),
        help="what samples files keep of each generation's thinking: its text (full), its "
        f"length in characters, or nothing (default {default('log_samples_reasoning')})",
    )
    run.add_argument(
        "--unclosed-thinking",
        choices=list(UNCLOSED_THINKING),
        default=default("unclosed_thinking"),
        help="a generation whose thinking never closed is scored as an empty answer (empty), "
        "as lm-eval scores it, the unfinished thought (keep), or fails its task (fail); "
        f"docs/reasoning-models.md (default {default('unclosed_thinking')})",
    )
    run.add_argument(
        "--metadata",
        default="",
        help="JSON (or k=v) merged into every task's metadata, e.g. '{\"max_seq_lengths\": [4096]}'",
    )
    run.add_argument(
        "--show-config",
        action="store_true",
        help="print every task's configuration (results.json `configs`) after the tables",
    )
    run.add_argument(
        "--cluster-by",
        action="append",
        default=[],
        metavar="TASK=FIELD",
        help="cluster a task's docs by a dataset field (docs sharing a passage, story...): "
        "results add <metric>_stderr_clustered (repeatable)",
    )
    run.add_argument(
        "--seed",
        default=default("seed"),
        metavar="N|PYTHON,NUMPY,TORCH,FEWSHOT",
        help="lm-eval's seeds: Python's random, numpy, torch (also sampled generations) and "
        "few-shot selection; one number sets all four, None leaves one unset "
        "(default 0,1234,1234,1234, as lm-eval)",
    )
    run.add_argument(
        "--apply-chat-template",
        action="store_true",
        help="render prompts with the model's chat template",
    )
    run.add_argument(
        "--system-instruction",
        default=default("system_instruction"),
        help="system prompt placed before the task description",
    )
    run.add_argument(
        "--fewshot-as-multiturn",
        action="store_true",
        default=default("fewshot_as_multiturn"),
        help="few-shot examples as chat turns",
    )
    run.add_argument(
        "--gen-kwargs", default="", help="generation settings merged into every generative task"
    )
    run.add_argument(
        "--bootstrap-iters",
        type=int,
        default=default("bootstrap_iters"),
        help="bootstrap iterations for non-mean stderr (0 disables)",
    )
    run.add_argument(
        "--cache",
        default=default("cache"),
        help="response cache file (default OUTPUT_DIR/cache.sqlite)",
    )
    run.add_argument(
        "--no-cache", action="store_true", help="do not read or write the response cache"
    )
    run.add_argument(
        "--confirm-run-unsafe-code",
        action="store_true",
        help="allow tasks that execute model-written code",
    )
    run.add_argument(
        "--sandbox",
        choices=list(MODES),
        default=default("sandbox"),
        help="where model-written code runs: auto (bubblewrap namespaces; refused where they "
        "cannot start), bwrap, docker (needs --sandbox-image), rlimits (limits only: no network "
        "or file isolation), none",
    )
    run.add_argument(
        "--sandbox-image",
        default=default("sandbox_image"),
        help="docker: the image programs run in (it must hold python3)",
    )
    run.add_argument(
        "--sandbox-workers",
        type=_positive_int,
        default=default("sandbox_workers"),
        help="model-written programs run at once (default one per CPU)",
    )
    run.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress display at all (transformers' and datasets' bars included)",
    )
    run.add_argument(
        "--executor",
        choices=["local", "ray"],
        default=default("executor"),
        help="where requests run: this process, or Ray actors holding model replicas",
    )
    run.add_argument(
        "--replicas",
        type=_positive_int,
        default=default("replicas"),
        help="ray: model replicas (default one per GPU of the cluster, one without GPUs)",
    )
    run.add_argument(
        "--gpus-per-replica",
        type=float,
        default=default("gpus_per_replica"),
        help="ray: GPUs per replica, e.g. the vLLM tensor-parallel size (default 1, 0 without GPUs)",
    )
    run.add_argument(
        "--ray-address",
        default=default("ray_address"),
        help="ray: cluster to join, e.g. auto or ray://head:10001 (default a local Ray instance)",
    )
    run.add_argument(
        "--log-to",
        action="append",
        default=default("log_to"),
        metavar="TRACKER",
        help="log the finished run to mlflow, wandb, trackio or hub (comma separated or repeatable; "
        "each needs its extra: pip install 'assay[mlflow]' ...; needs --output-dir)",
    )
    run.add_argument(
        "--log-to-args",
        default="",
        help="tracker settings k=v,...: name (default the output dir's name), project, "
        "tracking_uri (mlflow), entity (wandb), group (wandb, trackio), space_id (trackio), "
        "repo=ORG/NAME, private (hub)",
    )
    add_lm_eval_flags(run)
    return run


# RunSettings fields whose flag is spelled differently, or that only the Python API sets.
_NEGATED_FLAGS = {"show_progress": "no_progress"}
_API_ONLY = {"dataset_loading_processes"}
_LISTING = ("list", "list_groups", "list_tags", "list_subtasks")
"""lm-eval's `--tasks list` and its variants."""


def settings_from_args(args: argparse.Namespace) -> RunSettings:
    """The RunSettings of an `assay run` command line: one field per flag, same name."""
    from assay.models.args import parse_kv

    values = {
        name: getattr(args, name)
        for name in setting_names()
        if name not in _API_ONLY and name not in _NEGATED_FLAGS
    }
    values.update({name: not getattr(args, flag) for name, flag in _NEGATED_FLAGS.items()})
    values["model_args"] = parse_kv(args.model_args, "--model-args")
    values["judge_model_args"] = parse_kv(args.judge_model_args, "--judge-model-args")
    values["second_judge_model_args"] = parse_kv(
        args.second_judge_model_args, "--second-judge-model-args"
    )
    values["gen_kwargs"] = parse_kv(args.gen_kwargs, "--gen-kwargs")
    values["metadata"] = parse_kv(args.metadata, "--metadata")
    values["samples"] = parse_samples(args.samples)
    values["seed"] = parse_seeds(args.seed)
    values["cluster_by"] = parse_cluster_by(args.cluster_by)
    values["log_to"] = split_csv(args.log_to)
    values["log_to_args"] = parse_kv(args.log_to_args, "--log-to-args")
    if args.no_cache:
        values["cache"] = False
    return RunSettings(**values)


def main(args: argparse.Namespace) -> int:
    """Run the evaluation the command line describes and print its tables."""
    from assay.evaluator import Evaluation, results_tables
    from assay.tasks.registry import Registry

    names = split_csv(args.tasks)
    listing = [n for n in names if n in _LISTING]
    if listing:
        raise ConfigError(
            f"--tasks {listing[0]}: assay lists tasks, groups and tags with `assay tasks list` "
            "(`assay tasks list NAME` filters by a substring; add --include-path for yours)."
        )
    print_notes(apply_lm_eval_flags(args))
    settings = settings_from_args(args)
    if not settings.show_progress:
        from assay.execution.progress import silence_library_progress

        silence_library_progress()
    registry = Registry(args.include_path, args.custom_tasks)
    evaluation = Evaluation(registry.resolve(names), settings)
    results = evaluation.run()
    if not evaluation.executor.primary:
        return 0  # another rank of a data-parallel launch: rank 0 prints and writes
    model_text = f"{args.model} ({args.model_args})" if args.model_args else args.model
    print(
        f"{model_text}, limit: {args.limit}, num_fewshot: {args.num_fewshot}, batch_size: {args.batch_size}"
    )
    print(results_tables(results))
    if args.show_config:
        for name, config in results["configs"].items():
            print(f"\n{name}:\n{json.dumps(config, indent=2, ensure_ascii=False, default=str)}")
    if args.output_dir:
        print(f"\nresults written to {args.output_dir}/results.json")
    for where in evaluation.tracked:
        print(f"logged to {where}")
    return 0


def config_defaults(path: str, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """The flags a --config YAML file sets, as `parser` defaults (so the command line wins).

    Keys are flag names with - or _ (lm-eval's spelling): model_args, tasks, output_path ...;
    values take the flag's type. An unknown key or a wrong value names the file and key."""
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            loaded = yaml.safe_load(handle)
    except OSError as exc:
        raise ConfigError(f"--config {path}: cannot read it ({exc.strerror}).") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"--config {path}: not valid YAML: {exc}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"--config {path}: expected a mapping of flag: value, got {loaded!r}.")
    actions = {
        option: action
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option not in ("--help", "--config", "--verbose")
    }
    defaults: dict[str, Any] = {}
    for key, value in loaded.items():
        flag = "--" + str(key).replace("_", "-")
        action = actions.get(flag)
        if action is None:
            import difflib

            close = difflib.get_close_matches(flag, list(actions), n=1)
            hint = f" (did you mean {close[0][2:]!r}?)" if close else ""
            raise ConfigError(
                f"--config {path}: {key!r} is not an `assay run` flag{hint}. Flags: "
                f"{', '.join(sorted({a[2:] for a in actions}))}."
            )
        defaults[action.dest] = _config_value(path, key, value, action)
    return defaults


def _config_value(path: str, key: Any, value: Any, action: argparse.Action) -> Any:
    """`value` as the flag's own parsing would give it."""
    where = f"--config {path}: {key}"
    if action.dest == "seed":  # lm-eval's forms: a number, a list, "0,1234,1234,1234", null
        return parse_seeds(value, where)
    if isinstance(action, argparse._StoreTrueAction):
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, got {value!r}.")
        return value
    if isinstance(action, argparse._AppendAction):
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(v, str | int | float) for v in items):
            raise ConfigError(f"{where} must be a string or a list of strings, got {value!r}.")
        return [str(v) for v in items]
    if value is None or action.type is None:
        return value
    try:
        return action.type(str(value))  # type: ignore[operator]
    except argparse.ArgumentTypeError as exc:
        raise ConfigError(f"{where}: {exc}.") from None
    except ValueError:
        raise ConfigError(f"{where}: {value!r} is not valid here.") from None
