"""--model-args: parsed from the command line, and checked against each backend's declaration.

Every backend declares its arguments once, as a table of `Arg`s (type, default, limits), and
builds its settings dataclass from `typed_args(backend, given, table)`. `--model-args
num_concurrent=8` reaches a backend as the int 8, `evaluate(model_args={...})` may pass "8", and
a JSON object may carry either. Every value is checked and converted here, before any model is
loaded or any request is sent, so a typo fails in the first second of a run: unknown names are
refused with the closest valid one, values with the type they must have.
"""

from __future__ import annotations

import ast
import difflib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from assay.errors import ConfigError

REQUIRED: Any = object()
"""Default of an argument the user must give."""

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}
_NULL = {"none", "null", ""}

BatchSize = int | Literal["auto"]
"""A positive number of requests (or rows), or "auto" for the backend's own choice."""


class AutoOrCount:
    """Arg kind of a batch size: "auto" or a positive whole number."""


@dataclass(frozen=True, slots=True)
class Arg:
    """One model argument: its type, default and limits."""

    kind: type
    """str, int, float, bool, dict or AutoOrCount."""
    default: Any = None
    nullable: bool = False
    """Whether None (written none/null) is allowed."""
    minimum: float | None = None
    choices: tuple[str, ...] = ()
    normalise: Callable[[Any], Any] | None = None
    """Applied to the converted value before `choices` are checked; a ValueError refuses it."""
    expected: str | None = None
    """What a valid value looks like, for messages (default: from `kind`)."""


def typed_args(backend: str, given: Mapping[str, Any], spec: Mapping[str, Arg]) -> dict[str, Any]:
    """All of `spec`'s arguments, converted and checked; unknown or missing ones are an error."""
    refuse_unknown(backend, given, list(spec))
    out: dict[str, Any] = {}
    for name, arg in spec.items():
        if name not in given:
            if arg.default is REQUIRED:
                raise ConfigError(
                    f"--model {backend}: model arg {name!r} is required; add {name}=... to --model-args."
                )
            out[name] = arg.default
            continue
        out[name] = _convert(backend, name, given[name], arg)
    return out


def _convert(backend: str, name: str, value: Any, arg: Arg) -> Any:
    where = f"--model {backend}: model arg {name}={value!r}"
    if value is None or (
        isinstance(value, str) and value.strip().lower() in _NULL and arg.kind is not str
    ):
        if arg.nullable:
            return None
        raise ConfigError(f"{where} must be {_describe(arg)}, not empty.")
    try:
        converted = _CONVERTERS[arg.kind](value)
        if arg.normalise is not None:
            converted = arg.normalise(converted)
    except (TypeError, ValueError):
        raise ConfigError(f"{where} must be {_describe(arg)}.") from None
    if arg.minimum is not None and converted < arg.minimum:
        raise ConfigError(f"{where} must be at least {arg.minimum:g}.")
    if arg.choices and converted not in arg.choices:
        raise ConfigError(f"{where} must be one of {', '.join(arg.choices)}.")
    return converted


def to_bool(value: Any) -> bool:
    """A model arg's truth value (true/false, yes/no, on/off, 1/0); ValueError otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(value)


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError(value)
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(value)
        return int(value)
    return int(str(value).strip()) if isinstance(value, str) else int(value)


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise TypeError(value)
    return float(value.strip()) if isinstance(value, str) else float(value)


def _to_str(value: Any) -> str:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return str(value)
    raise TypeError(value)


def _to_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, dict):
        raise TypeError(value)
    return dict(value)


def to_batch_size(value: Any) -> BatchSize:
    """ "auto" or a positive whole number; ValueError otherwise. lm-eval's "auto:N" (re-pick
    the size N times) is "auto": backends that size batches themselves re-pick every batch."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    if isinstance(value, str) and value.strip().lower().startswith("auto:"):
        if not value.strip()[5:].isdigit() or int(value.strip()[5:]) < 1:
            raise ValueError(value)
        return "auto"
    number = _to_int(value)
    if number < 1:
        raise ValueError(value)
    return number


_CONVERTERS: dict[type, Callable[[Any], Any]] = {
    bool: to_bool,
    int: _to_int,
    float: _to_float,
    str: _to_str,
    dict: _to_dict,
    AutoOrCount: to_batch_size,
}


def _describe(arg: Arg) -> str:
    names = {
        bool: "true or false",
        int: "a whole number",
        float: "a number",
        str: "a string",
        dict: "a JSON object",
        AutoOrCount: "a positive whole number or 'auto'",
    }
    text = arg.expected or names[arg.kind]
    return f"{text} or none" if arg.nullable else text


def parse_kv(text: str | dict[str, Any] | None, flag: str) -> dict[str, Any]:
    """`k=v,k2=v2` (or a JSON object) to a dict; values go through literal_eval like lm-eval."""
    if text is None or text == "":
        return {}
    if isinstance(text, dict):
        return dict(text)
    text = text.strip()
    if text.startswith("{"):
        import json

        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{flag}: not valid JSON: {exc.msg} at column {exc.colno}.") from None
        if not isinstance(value, dict):
            raise ConfigError(f"{flag}: a JSON value must be an object.")
        return value
    out: dict[str, Any] = {}
    for part in _split_top_level(text):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"{flag}: {part!r} is not key=value; write e.g. {flag} pretrained=gpt2,dtype=float32."
            )
        try:
            out[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            out[key.strip()] = value.strip()
    return out


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets and quotes (so lists survive: until=['a','b'])."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "[({":
            depth += 1
        elif ch in "])}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def refuse_unknown(backend: str, given: Mapping[str, Any], valid: Sequence[str]) -> None:
    """A ConfigError naming each unknown argument (with the closest valid name) and the valid
    ones, when `given` has any argument not in `valid`."""
    unknown = sorted(set(given) - set(valid))
    if not unknown:
        return
    named = []
    for name in unknown:
        close = difflib.get_close_matches(name, valid, n=1)
        named.append(f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name))
    # --device reaches every backend as a model arg; say where it came from.
    hint = " (--device sets device: drop that flag for this backend)" if "device" in unknown else ""
    raise ConfigError(
        f"--model {backend}: unknown model arg(s) {', '.join(named)}{hint}. "
        f"Valid: {', '.join(sorted(valid))}."
    )
