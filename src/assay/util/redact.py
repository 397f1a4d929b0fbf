"""Keep secrets (API keys, tokens, passwords) out of every table, file and log line.

Values stored under secret-looking keys are replaced by a placeholder, and the secret strings
themselves are scrubbed from any text, so a key pasted into a base URL or an error message does
not leak either.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

PLACEHOLDER = "***"
_SECRET_KEY = re.compile(
    r"(^|[_\-.])(api[_\-]?key|apikey|secret|secret[_\-]?key|password|passwd|authorization|"
    r"credentials?|access[_\-]?token|auth[_\-]?token|bearer|private[_\-]?key)$",
    re.IGNORECASE,
)
_MIN_SECRET_LENGTH = 4


def is_secret_key(key: str) -> bool:
    """Whether a config key names a secret (api_key, client_config.api_key, password, ...)."""
    return bool(_SECRET_KEY.search(str(key)))


def redact(value: Any) -> Any:
    """A copy of `value` with every value under a secret key replaced by the placeholder."""
    if isinstance(value, Mapping):
        return {
            k: (PLACEHOLDER if is_secret_key(k) and v is not None else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(redact(v) for v in value)
    return value


def find_secrets(value: Any) -> set[str]:
    """Every string stored under a secret key anywhere in `value`."""
    found: set[str] = set()
    if isinstance(value, Mapping):
        for k, v in value.items():
            if is_secret_key(k) and isinstance(v, str) and len(v) >= _MIN_SECRET_LENGTH:
                found.add(v)
            else:
                found |= find_secrets(v)
    elif isinstance(value, list | tuple):
        for v in value:
            found |= find_secrets(v)
    return found


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of a secret replaced by the placeholder."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, PLACEHOLDER)
    return text


def scrub_value(value: Any, secrets: set[str]) -> Any:
    """`value` with every secret string scrubbed, at any depth."""
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, dict):
        return {k: scrub_value(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_value(v, secrets) for v in value]
    return value


_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
_SECRET_PAIR = re.compile(r"([\w.\-]+)=([^,\s]*)")


def redact_command(argv: Iterable[str]) -> str:
    """A command line as text that can be shown and stored: values of secret-looking
    `key=value` pairs (model args) and of secret-looking flags, and URL user info, replaced by
    the placeholder."""
    words: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next:
            words.append(PLACEHOLDER)
            hide_next = False
            continue
        flag, sep, _ = word.partition("=")
        if word.startswith("-") and is_secret_key(flag.lstrip("-")):
            words.append(f"{flag}={PLACEHOLDER}" if sep else word)
            hide_next = not sep
            continue
        word = _SECRET_PAIR.sub(
            lambda m: f"{m[1]}={PLACEHOLDER}" if is_secret_key(m[1]) else m[0], word
        )
        words.append(_USERINFO.sub(f"{PLACEHOLDER}@", word))
    return " ".join(words)
