"""evaluate(): a benchmark run from Python, with the command line's forms of every argument."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from assay.errors import ConfigError
from assay.models.base import LM, BackendLike
from assay.run.evaluation import Evaluation
from assay.run.settings import RunSettings, default, setting_names
from assay.tasks.names import split_csv
from assay.tasks.registry import Registry


def evaluate(
    model: str | LM | BackendLike,
    tasks: str | Sequence[str],
    *,
    include_path: str | Path | Sequence[str | Path] = (),
    custom_tasks: str | Path | Sequence[str | Path] = (),
    **settings: Any,
) -> dict[str, Any]:
    """Evaluate `model` (a backend name such as "hf", an LM object, or any object with LM's
    request methods and `identity`: `BackendLike`) on `tasks` and return the results dict
    (lm-eval layout).

    The keywords after `custom_tasks` are the fields of RunSettings, with its defaults and its
    checks (documented there; `inspect.signature(evaluate)` lists them). Arguments take the
    command line's forms too: `tasks="a,b"`, `model_args` and `gen_kwargs` as "k=v,k2=v2"
    strings, a single include path or custom task file. A value the command line would refuse
    is refused with the same message.
    """
    unknown = sorted(set(settings) - set(_KEYWORDS))
    if unknown:
        close = difflib.get_close_matches(unknown[0], _KEYWORDS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(
            f"evaluate(): {unknown[0]!r} is not a keyword{hint}; its keywords are "
            f"include_path, custom_tasks and the RunSettings fields: {', '.join(_KEYWORDS)}."
        )
    run = RunSettings(model=model, **settings)
    from assay.tasks.runtime_guard import start_run

    start_run(run.confirm_run_unsafe_code)  # before any task file is imported, as `assay run`
    registry = Registry(
        _paths(include_path),
        _paths(custom_tasks),
        confirm_run_unsafe_code=run.confirm_run_unsafe_code,
    )
    names = split_csv([tasks] if isinstance(tasks, str) else list(tasks))
    evaluation = Evaluation(registry.resolve(names), run)
    return evaluation.run()


_KEYWORDS = [name for name in setting_names() if name != "model"]
"""The RunSettings fields evaluate() takes as keywords (`model` is its first argument)."""


def _signature() -> inspect.Signature:
    """evaluate()'s signature with every setting spelled out, as help() and editors show it."""
    given = inspect.signature(evaluate).parameters
    fixed = [p for p in given.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    types = RunSettings.__annotations__
    keywords = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default(name),
                          annotation=types[name])
        for name in _KEYWORDS
    ]  # fmt: skip
    return inspect.signature(evaluate).replace(parameters=[*fixed, *keywords])


evaluate.__signature__ = _signature()  # type: ignore[attr-defined]


def _paths(value: str | Path | Sequence[str | Path]) -> list[str | Path]:
    """One path or several (a lone string is a path, not a sequence of characters)."""
    return [value] if isinstance(value, str | Path) else list(value)
