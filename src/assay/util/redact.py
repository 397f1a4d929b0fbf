"""Keep secrets (API keys, tokens, passwords) out of every table, file and log line.

Values stored under secret-looking keys are replaced by a placeholder, and the secret strings
themselves are scrubbed from any text, so a key pasted into a base URL or an error message does
not leak either.

Every output of a run goes through `clean` (values) or `clean_text` (text): results.json,
samples, batch journals, tracker params and files, log records, error messages and the
terminal header. They hide
- the user info of URLs (`http://user:pass@host` -> `http://***@host`),
- query parameters and headers whose names look secret (`api-key`, `key`, `token`, `sig`,
  `authorization`, ...), in URL query strings and in `default_query` / `default_headers`,
- values stored under secret-looking keys (`api_key`, `password`, ...),
- and the secret strings themselves wherever they appear, once `remember`ed (an API backend
  remembers its key and every secret of its model args when it is built). Free text is
  searched for secrets of `MIN_SCRUBBED` characters or more: a shorter one would blank
  ordinary words of prompts and answers; it is still hidden where its place names it.
"""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

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
_QUOTED_PAIR = re.compile(r"""((["'])([\w.\-]+)\2\s*:\s*)(["'])(.*?)\4""")
"""A quoted `"name": "value"` pair (a dict model arg such as default_query, as typed)."""


def redact_command(argv: Iterable[str]) -> str:
    """A command line as text that can be shown and stored: values of secret-looking
    `key=value` pairs (model args), of quoted `"name": "value"` pairs whose names look like
    secret query parameters or headers (default_query, default_headers), of secret-looking
    flags, and URL user info, replaced by the placeholder; remembered secrets too."""
    return clean_text(" ".join(redact_words(argv)))


def redact_words(argv: Iterable[str]) -> list[str]:
    """`argv` word by word, as `redact_command` hides it (without the remembered secrets)."""
    words: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next:
            words.append(PLACEHOLDER)
            hide_next = False
            continue
        flag, sep, value = word.partition("=")
        prefix = ""
        if word.startswith("-"):
            if is_secret_key(flag.lstrip("-")):
                words.append(f"{flag}={PLACEHOLDER}" if sep else word)
                hide_next = not sep
                continue
            if sep:  # --model-args=api_key=...: the value is read as its own word
                prefix, word = f"{flag}=", value
        word = prefix + _SECRET_PAIR.sub(
            lambda m: f"{m[1]}={PLACEHOLDER}" if is_secret_key(m[1]) else m[0], word
        )
        word = _QUOTED_PAIR.sub(
            lambda m: f"{m[1]}{m[4]}{PLACEHOLDER}{m[4]}" if is_secret_param(m[3]) else m[0], word
        )
        words.append(_USERINFO.sub(f"{PLACEHOLDER}@", word))
    return words


# -- one redaction for every output -----------------------------------------------------------

_SECRET_PARAM = re.compile(
    r"key|token(?!s\b|s_|izer)|secret|passw|pwd|auth|signature|credential|cookie|^sig$|^code$",
    re.IGNORECASE,
)
_PARAM_HOLDERS = re.compile(r"(^|_)(query|headers)$", re.IGNORECASE)
"""Mappings of query parameters or headers (default_query, default_headers, ...): their
entries are judged by name as parameters are (`is_secret_param`)."""
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s\"'<>`]+")
_QUERY_PAIR = re.compile(r"([?&;])([^=&#;\s]+)=([^&#;\s]*)")
MIN_SCRUBBED = 8
"""Remembered secrets shorter than this are not searched for in free text (see above)."""

_remembered: set[str] = set()
_lock = threading.Lock()


def is_secret_param(name: str) -> bool:
    """Whether a query parameter or header name looks secret (api-key, key, token, sig,
    Authorization, X-Api-Key, ...)."""
    return is_secret_key(name) or bool(_SECRET_PARAM.search(str(name)))


def redact_url(url: str) -> str:
    """`url` with its user info and the values of secret-looking query parameters hidden."""
    url = _USERINFO.sub(f"{PLACEHOLDER}@", url, count=1)
    return _QUERY_PAIR.sub(
        lambda m: f"{m[1]}{m[2]}={PLACEHOLDER}" if is_secret_param(m[2]) and m[3] else m[0], url
    )


def _url_secrets(url: str) -> set[str]:
    """The user info and secret query values of `url` (what `redact_url` hides)."""
    found: set[str] = set()
    try:
        parts = urlsplit(url)
    except ValueError:
        return found
    for value in (parts.username, parts.password):
        if value:
            found.add(value)
    if parts.username or parts.password:
        # Clients send user info as HTTP basic auth: a server repeating the header shows it so.
        pair = f"{parts.username or ''}:{parts.password or ''}"
        found.add(base64.b64encode(pair.encode()).decode())
    found |= {m[3] for m in _QUERY_PAIR.finditer("?" + parts.query) if is_secret_param(m[2])}
    return found


def remember(*values: Any) -> None:
    """Hide these secret strings from every output from now on (see the module's notes); of a
    header value such as `Bearer <token>`, the token too."""
    found = {v for v in values if isinstance(v, str) and v}
    found |= {v.split()[-1] for v in found if v.split()}
    with _lock:
        _remembered.update(found)


def remember_in(value: Any, params: bool = False) -> None:
    """Remember every secret `value` holds: strings under secret-looking keys or secret-looking
    entries of query and header mappings, and the secret parts of URLs (model args)."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            secret = is_secret_param(k) if params else is_secret_key(k)
            if secret and v is not None and not isinstance(v, Mapping | list | tuple):
                remember(str(v))
            else:
                remember_in(v, params=bool(_PARAM_HOLDERS.search(str(k))))
    elif isinstance(value, list | tuple):
        for v in value:
            remember_in(v)
    elif isinstance(value, str):
        for url in _URL.findall(value):
            remember(*_url_secrets(url))


def clean_text(text: str) -> str:
    """`text` as any output may show it: URLs redacted (`redact_url`) and every remembered
    secret replaced by the placeholder."""
    if "://" in text:
        text = _URL.sub(lambda m: redact_url(m[0]), text)
    with _lock:
        secrets = [s for s in _remembered if len(s) >= MIN_SCRUBBED]
    return scrub(text, secrets) if secrets else text


def clean(value: Any, params: bool = False) -> Any:
    """A copy of `value` as any output may hold it: values under secret-looking keys (and
    secret-looking entries of query and header mappings) replaced by the placeholder, every
    string through `clean_text`. Values holding no secret come back equal."""
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            secret = is_secret_param(k) if params else is_secret_key(k)
            if secret and v is not None and not isinstance(v, Mapping | list | tuple):
                out[k] = PLACEHOLDER
            else:
                out[k] = clean(v, params=bool(_PARAM_HOLDERS.search(str(k))))
        return out
    if isinstance(value, list):
        return [clean(v) for v in value]
    if isinstance(value, tuple):
        return tuple(clean(v) for v in value)
    if isinstance(value, str):
        return clean_text(value)
    return value
