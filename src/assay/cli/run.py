"""`assay run`: evaluate a model on tasks. Its flags are the fields of RunSettings, with the
defaults RunSettings declares (one table: assay/run/settings.py)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from assay.backend_names import BUILTIN_BACKENDS
from assay.cli.lm_eval_flags import add_flags as add_lm_eval_flags
from assay.cli.lm_eval_flags import apply_flags as apply_lm_eval_flags
from assay.cli.lm_eval_flags import print_notes
from assay.errors import ConfigError
from assay.run.settings import RunSettings, checked, default, describe, setting_names
from assay.tasks.names import split_csv
from assay.util.redact import clean, redact_command
from assay.util.terminal import terminal_safe


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
        "--show-config",
        action="store_true",
        help="print every task's configuration (results.json `configs`) after the tables",
    )
    run.add_argument(
        "--no-cache", action="store_true", help="do not read or write the response cache"
    )
    add_setting_flags(run)
    add_lm_eval_flags(run)
    return run


_LISTING = ("list", "list_groups", "list_tags", "list_subtasks")
"""lm-eval's `--tasks list` and its variants."""


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per RunSettings field that has one, as its declaration gives it."""
    for name in setting_names():
        spec = describe(name)
        if spec.flag is None:
            continue
        options = {"default": default(name), **spec.flag.argparse}
        if name == "model":  # the built-in names are listed where the registry is not imported
            spec_help = f"{spec.help}; built-in: {', '.join(BUILTIN_BACKENDS)}"
        else:
            spec_help = spec.help
        shown = options["default"]
        switch = options.get("action") in ("store_true", "store_false")
        if not switch and shown not in (None, "", [], {}) and "(default" not in spec_help:
            spec_help = f"{spec_help} (default {shown})"
        parser.add_argument(*spec.flag.names, dest=name, help=spec_help, **options)


def settings_from_args(args: argparse.Namespace) -> RunSettings:
    """The RunSettings of an `assay run` command line: each field from its flag, as typed
    (RunSettings checks and converts it, as it does a value given from Python)."""
    values = {name: getattr(args, name) for name in setting_names() if describe(name).flag}
    if args.no_cache:
        values["cache"] = False
    return RunSettings(**values)


def main(args: argparse.Namespace) -> int:
    """Run the evaluation the command line describes and print its tables."""
    from assay.results.table import results_tables
    from assay.run.evaluation import Evaluation
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
    from assay.tasks.runtime_guard import start_run

    start_run(settings.confirm_run_unsafe_code)  # before any task file is imported
    if not settings.show_progress:
        from assay.execution.progress import silence_library_progress

        silence_library_progress()
    registry = Registry(
        args.include_path,
        args.custom_tasks,
        confirm_run_unsafe_code=settings.confirm_run_unsafe_code,
    )
    evaluation = Evaluation(registry.resolve(names), settings)
    results = evaluation.run()
    if not evaluation.executor.primary:
        return 0  # another rank of a data-parallel launch: rank 0 prints and writes
    model_text = f"{args.model} ({args.model_args})" if args.model_args else args.model
    model_text = redact_command([model_text])  # URLs, secret args and keys hidden
    print(
        f"{model_text}, limit: {args.limit}, num_fewshot: {args.num_fewshot}, batch_size: {args.batch_size}"
    )
    print(terminal_safe(results_tables(results)))
    if args.show_config:
        for name, config in results["configs"].items():
            text = json.dumps(clean(config), indent=2, ensure_ascii=False, default=str)
            print(f"\n{name}:\n{text}")
    from assay.run.bill import bill_line

    line = bill_line(evaluation.bill or {})
    if line:
        print(f"\n{terminal_safe(line)}")
    if evaluation.files is not None:
        print(f"\nresults written to {evaluation.files.results}")
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
    """`value` as the flag's own parsing would give it; a run setting's value is checked now,
    so that a mistake names the file and key."""
    where = f"--config {path}: {key}"
    if isinstance(action, argparse._StoreConstAction) and isinstance(action.const, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, got {value!r}.")
        return value if action.const else not value  # no_progress: true turns progress off
    if isinstance(action, argparse._AppendAction):
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(v, str | int | float) for v in items):
            raise ConfigError(f"{where} must be a string or a list of strings, got {value!r}.")
        return [str(v) for v in items]
    if action.dest in setting_names():
        return checked(action.dest, value, where)
    if value is None or action.type is None:
        return value
    try:
        return action.type(str(value))  # type: ignore[operator]
    except argparse.ArgumentTypeError as exc:
        raise ConfigError(f"{where}: {exc}.") from None
    except ValueError:
        raise ConfigError(f"{where}: {value!r} is not valid here.") from None
