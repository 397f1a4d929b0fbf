"""lighteval's task strings and built-in tasks, resolved from the installed lighteval package.

A task string is `suite|task|k[|truncate]` (lighteval before 0.10), `suite|task|k` or `task|k`
(lighteval 0.13, which ignores the suite), or `task`; the task may carry metric parameters,
`task@k=1@n=16|0`, set on the sample functions of its metrics whose names contain "@" (as
lighteval does). A superset name (`mmlu`) runs every task named `mmlu:...`.

Which definition a name means is decided by one rule, and the choice is printed:
- a string with a lighteval suite (`lighteval|gsm8k|5`, `leaderboard|mmlu:abstract_algebra|5`,
  `extended|ifeval|0`, `custom|mytask|0`) means lighteval's task: a lighteval task of a
  --custom-tasks file first, else lighteval's built-in of that name;
- a string without a suite means assay's task (built-in, --custom-tasks, --include-path), and
  lighteval's built-in only when assay has none of that name.

lighteval's own loader imports all of its ~100 task modules, one of which downloads a file at
import time; this imports only the modules whose source mentions the name.
"""

from __future__ import annotations

import ast
import copy
import importlib
import importlib.util
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.errors import TaskConfigError

log = logging.getLogger(__name__)

SUITES = (
    "lighteval",
    "leaderboard",
    "extended",
    "helm",
    "bigbench",
    "harness",
    "original",
    "custom",
    "test",
    "community",
    "multilingual",
)
"""lighteval's suite names (CORE_SUITES and OPTIONAL_SUITES)."""


@dataclass(frozen=True)
class TaskString:
    """One task string, parsed."""

    text: str
    name: str
    num_fewshot: int | None = None
    """The few-shot count the string gives (`name|k`); None when it gives none."""
    suite: str | None = None
    """The lighteval suite the string names, if any."""
    truncate: bool = False
    """`|1` in lighteval's old four-part form: drop few-shot examples until the prompt fits."""
    metric_params: dict[str, Any] = field(default_factory=dict)
    """`task@k=1@n=16`: attributes set on the task's parametrisable metrics."""


def parse(text: str) -> TaskString:
    """A task string as assay and lighteval read it (see the module doc)."""
    parts = [p.strip() for p in text.strip().split("|")]
    suite = None
    if len(parts) >= 3 or (len(parts) == 2 and parts[0] in SUITES and not parts[1].isdigit()):
        suite, *parts = parts
        if suite not in SUITES:
            raise TaskConfigError(
                f"task string {text!r}: {suite!r} is not a lighteval suite ({', '.join(SUITES)}). "
                "Write 'task|k', or 'suite|task|k' with one of those suites."
            )
    if not parts[0]:
        raise TaskConfigError(f"task string {text!r}: empty task name.")
    if len(parts) > 3:
        raise TaskConfigError(
            f"task string {text!r}: expected 'task', 'task|k', 'suite|task|k' or "
            "'suite|task|k|truncate' (truncate 0 or 1)."
        )
    name, *rest = parts
    num_fewshot = _number(text, rest[0], "the number of few-shot examples") if rest else None
    truncate = (
        bool(_number(text, rest[1], "truncate (0 or 1)", limit=1)) if len(rest) > 1 else False
    )
    name, *params = name.split("@")
    return TaskString(text, name, num_fewshot, suite, truncate, _metric_params(text, params))


def _number(text: str, value: str, what: str, limit: int | None = None) -> int:
    if not value.isdigit() or (limit is not None and int(value) > limit):
        raise TaskConfigError(
            f"task string {text!r}: {value!r} must be {what}, e.g. 'gsm8k|5' or 'lighteval|gsm8k|5|0'."
        )
    return int(value)


def _metric_params(text: str, params: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in params:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise TaskConfigError(
                f"task string {text!r}: metric parameter {item!r} must be key=value, e.g. "
                "'aime24@k=1@n=4|0'."
            )
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise TaskConfigError(
                f"task string {text!r}: metric parameter {key}={value!r} is not a Python "
                "literal (a number, a string in quotes, a list ...)."
            ) from None
    return out


def installed() -> bool:
    """Whether lighteval is installed (a folder named lighteval on the path is not)."""
    spec = importlib.util.find_spec("lighteval")
    return spec is not None and spec.origin not in (None, "namespace")


def read_task_file(path: Path) -> list[str]:
    """The task strings of a file, one per line ('#' starts a comment line), as lighteval
    reads --tasks FILE."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def with_metric_params(config: Any, params: dict[str, Any], where: str) -> Any:
    """A copy of lighteval's config whose parametrisable metrics (name with "@") get `params`,
    as lighteval's registry sets them; refused when a required attribute stays unset."""
    if not params:
        return config
    config = copy.deepcopy(config)
    targets = [m for m in config.metrics if "@" in str(m.metric_name)]
    if not targets:
        raise TaskConfigError(
            f"{where}: metric parameters {params} given, but none of its metrics "
            f"({', '.join(str(m.metric_name) for m in config.metrics)}) takes parameters."
        )
    for metric in targets:
        for key, value in params.items():
            setattr(metric.sample_level_fn, key, value)
        for attribute in getattr(metric.sample_level_fn, "attribute_must_be_set", []):
            if getattr(metric.sample_level_fn, attribute) is None:
                raise TaskConfigError(
                    f"{where}: metric {metric.metric_name!r} needs '{attribute}' set, e.g. "
                    f"'{config.name}@{attribute}=1|0'."
                )
    return config


class Builtins:
    """lighteval's built-in task configs, imported module by module as names are asked for."""

    def __init__(self) -> None:
        self._configs: dict[str, tuple[Any, str]] = {}
        self._imported: set[str] = set()
        self._failed: dict[str, str] = {}

    @staticmethod
    def _modules() -> dict[str, Path]:
        spec = importlib.util.find_spec("lighteval.tasks.tasks")
        if spec is None or not spec.submodule_search_locations:
            from assay.compat.lighteval.files import missing_lighteval

            raise missing_lighteval("lighteval's built-in tasks need lighteval.tasks.tasks")
        root = Path(next(iter(spec.submodule_search_locations)))
        files = {
            f"lighteval.tasks.tasks.{p.stem}": p for p in root.glob("*.py") if p.stem != "__init__"
        }
        for main in sorted(root.glob("*/main.py")):
            files[f"lighteval.tasks.tasks.{main.parent.name}.main"] = main
        return dict(sorted(files.items()))

    def _load(self, base: str) -> None:
        for module, path in self._modules().items():
            if module in self._imported or base not in path.read_text(encoding="utf-8"):
                continue
            self._imported.add(module)
            try:
                loaded = importlib.import_module(module)
            except Exception as exc:  # a module needing an optional package or the network
                self._failed[module] = f"{type(exc).__name__}: {exc}"
                log.debug("lighteval task module %s failed to import: %s", module, exc)
                continue
            for config in getattr(loaded, "TASKS_TABLE", []):
                self._configs.setdefault(config.name, (config, str(path)))

    def get(self, name: str, where: str) -> list[tuple[Any, str]]:
        """lighteval's configs for `name` (every `name:...` for a superset), with their files."""
        base = name.split(":")[0]
        self._load(base)
        members = sorted(n for n in self._configs if n.split(":")[0] == name)
        if name in self._configs and len(members) <= 1:
            return [self._configs[name]]
        if len(members) > 1:
            return [self._configs[n] for n in members]
        failed = [f"{m} ({why})" for m, why in self._failed.items()]
        note = (
            f" lighteval modules that could not be imported here: {'; '.join(failed[:5])}."
            if failed
            else ""
        )
        raise TaskConfigError(
            f"{where}: lighteval has no task {name!r} (searched the installed lighteval's task "
            f"modules that mention {base!r}).{note} `lighteval tasks list` lists its tasks."
        )

    def has(self, name: str) -> bool:
        """Whether lighteval defines `name` (a task or a superset)."""
        try:
            self.get(name, "")
        except TaskConfigError:
            return False
        return True
