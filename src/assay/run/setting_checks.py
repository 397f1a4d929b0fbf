"""The conversions run settings go through (`Setting.check`): each takes a value in any of a
setting's forms (a flag's text, a --config file's value, a Python value) and `where` (the flag,
for messages), and returns the setting's value or refuses it with one message naming `where`,
the value and the fix. `run.settings` declares which setting takes which."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from assay.errors import ConfigError

Check = Callable[[Any, str], Any]
"""A setting's conversion: takes a value in any of the setting's forms (a flag's text, a config
file's value, a Python value) and `where` (the flag, for messages); returns the setting's value
or raises ConfigError naming `where`, the value and the fix. A setting's own value passes
unchanged, so a check may run again (`dataclasses.replace`)."""


def number(value: Any, where: str, noun: str = "a number") -> float:
    """`value` (a number, or its text) as a float; anything else is refused."""
    if isinstance(value, bool):
        raise ConfigError(f"{where} {value}: not {noun}.")
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        raise ConfigError(f"{where} {value!r}: not {noun}.") from None


def whole(value: Any, where: str) -> int:
    """`value` (a whole number, or its text) as an int; anything else is refused."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise ConfigError(f"{where} {value!r}: not a whole number.")


def optional(check: Check) -> Check:
    """`check` for a setting that None leaves unset."""

    def optional(value: Any, where: str) -> Any:
        return None if value is None else check(value, where)

    return optional


def at_least(low: int, fix: str) -> Check:
    """A whole number of `low` or more; `fix` says what to give instead."""

    def at_least(value: Any, where: str) -> int:
        number = whole(value, where)
        if number < low:
            raise ConfigError(f"{where} {value}: {fix}.")
        return number

    return at_least


def doc_limit(value: Any, where: str) -> int | float:
    """--limit: a number of docs per task, or a fraction of them below 1."""
    count = number(value, where)
    if not 0 < count < math.inf:
        raise ConfigError(
            f"{where} {value}: give a positive number of docs per task, or a fraction below 1 "
            "(0.1 = 10%)."
        )
    return count if count < 1.0 else int(count)


def batch_size(value: Any, where: str) -> int | str:
    """--batch-size: rows per batch (1 or more), 'auto' or lm-eval's 'auto:N'."""
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


def usd(value: Any, where: str) -> float:
    """A positive amount of USD."""
    amount = number(value, where, "an amount of USD")
    if not 0 < amount < math.inf:
        raise ConfigError(f"{where} {value}: give a positive amount of USD, e.g. 5 or 0.25.")
    return amount


def gpus(value: Any, where: str) -> float:
    """GPUs per replica: 0 or more, fractions allowed."""
    amount = number(value, where)
    if not 0 <= amount < math.inf:
        raise ConfigError(f"{where} {value}: give 0 or more GPUs per replica, e.g. 1 or 0.5.")
    return amount


def choice(options: Sequence[str]) -> Check:
    """One of `options`."""

    def choice(value: Any, where: str) -> str:
        if value not in options:
            raise ConfigError(f"{where} {value!r}: choose one of {', '.join(options)}.")
        return str(value)

    return choice


def text(value: Any, where: str) -> str:
    """A string."""
    if not isinstance(value, str):
        raise ConfigError(f"{where} {value!r}: give a string.")
    return value


def switch(value: Any, where: str) -> bool:
    """True or False (a flag that is on or off)."""
    if not isinstance(value, bool):
        raise ConfigError(f"{where} {value!r}: give True or False.")
    return value


def kv(value: Any, where: str) -> dict[str, Any]:
    """Keyword arguments: a dict, k=v,k2=v2 or a JSON object."""
    from assay.models.args import parse_kv

    if value is not None and not isinstance(value, str | dict):
        raise ConfigError(f"{where} {value!r}: give a dict, k=v,k2=v2 or a JSON object.")
    return parse_kv(value, where)


def gen_kwargs(value: Any, where: str) -> dict[str, Any]:
    """--gen-kwargs: keyword arguments whose generation settings are checked now."""
    from assay.requests.types import normalize_gen_kwargs

    given = kv(value, where)
    # Checked alone, whatever the tasks: a typo here must not surface mid-run.
    normalize_gen_kwargs(given, default_until=[], source=where)
    return given


def names(value: Any, where: str) -> list[str]:
    """Names, comma separated or repeated (a string, or a list of them)."""
    from assay.tasks.names import split_csv

    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise ConfigError(f"{where} {value!r}: give names, comma separated or as a list.")
    return split_csv(items)


def options(choices: Sequence[str]) -> str:
    """A choice flag's metavar, as argparse shows choices: {a,b,c}."""
    return "{" + ",".join(choices) + "}"


OPTIONAL_TEXT = optional(text)
"""A string, or None."""
NO_FEWER_THAN_ONE = optional(at_least(1, "must be 1 or more"))
"""A whole number of 1 or more, or None."""


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
    for part in names(value, flag):
        task, sep, key = (s.strip() for s in part.partition("="))
        if not sep or not task or not key:
            raise ConfigError(
                f"{flag} {part.strip()!r}: expected TASK=FIELD, e.g. race=article "
                "(the dataset field whose docs share a context)."
            )
        out[task] = key
    return out
