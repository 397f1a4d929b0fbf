"""What an API provider is to the backends: the `Provider` protocol and what providers share.

A provider (OpenAI, Anthropic, ...) is the part of an API backend that knows one vendor's SDK:
how to import it, build its clients, reach its batch API, read the token usage, typed answer and
rate-limit headers of its responses, and classify its errors. Everything else (pacing, retries,
`--max-cost` admission in `runner.CallRunner`; the `LM` surface in `backend`; request and answer
shapes in the endpoint classes) is the same whichever provider answers. Adding a provider is one
module implementing this protocol (see docs/architecture.md, "Adding an API provider").

The API key is held by `Key`, which never shows itself in a repr or a message.
"""

from __future__ import annotations

import importlib
import ipaddress
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, Protocol, TypeVar
from urllib.parse import urlsplit

from assay.errors import ModelError
from assay.models.api.batches import BatchLimits, BatchProvider
from assay.models.api.pacing import FailureKind, ProviderSignals, read_signals
from assay.models.api.runner import (
    PermanentFailure,
    TransientFailure,
    UnreadableAnswer,
    retryable_status,
)
from assay.models.api.usage import Usage
from assay.util.redact import clean_text, remember

R = TypeVar("R")

OVERLOAD_STATUS = frozenset({529})
"""Anthropic's "overloaded": waited out like a 429, without spending the retry budget."""


class Key:
    """An API key that never shows itself in a repr or a message (`util.redact` remembers it,
    so no output shows it either)."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None) -> None:
        self._value = value or None
        remember(self._value)

    @property
    def given(self) -> bool:
        """Whether a key was found."""
        return self._value is not None

    def reveal(self) -> str:
        """The key, for the SDK client ("unused" without one: local servers ignore it, but the
        clients insist on one)."""
        return self._value or "unused"

    def __repr__(self) -> str:
        return "<api key>" if self._value else "<no api key>"


class ClientSettings(Protocol):
    """The model args a provider builds its clients from (`backend.APISettings` has them)."""

    @property
    def base_url(self) -> str: ...
    @property
    def timeout(self) -> float: ...
    @property
    def max_retries(self) -> int: ...
    @property
    def default_query(self) -> dict[str, Any] | None: ...
    @property
    def default_headers(self) -> dict[str, Any] | None: ...
    @property
    def model(self) -> str: ...


OnResponse = Callable[[Any], Awaitable[None]]
"""An httpx response hook: sees every HTTP answer of the asynchronous client."""


class Provider(Protocol):
    """One vendor's SDK, as an API backend uses it."""

    package: str
    """The SDK's import name ("openai"), named in the message when it is missing."""
    batch_limits: BatchLimits
    """The provider's own batch limits (requests and bytes per batch)."""

    def sdk(self, backend: str) -> Any:
        """The imported SDK module; a ModelError naming `backend` and the extra to install."""
        ...

    def async_client(self, settings: ClientSettings, key: Key, on_response: OnResponse) -> Any:
        """The asynchronous client of online calls: no retries of its own (the call runner
        retries), every HTTP answer passed to `on_response`."""
        ...

    def sync_client(self, settings: ClientSettings, key: Key) -> Any:
        """The synchronous client of batch calls, retrying with the SDK's own backoff."""
        ...

    def batch_provider(
        self, client: Any, base_url: str, endpoint: str, limits: BatchLimits
    ) -> BatchProvider:
        """The batch API behind `batches.BatchProvider`, for requests to `endpoint`;
        `base_url` (redacted) names the batches in messages and journals."""
        ...

    def usage(self, usage: Any) -> Usage:
        """An answer's `usage` field (object or dict) as the meter counts it."""
        ...

    def typed_answer(self, body: dict[str, Any], endpoint: str) -> Any:
        """A batch result's JSON body as the SDK's typed answer (what an online call returns)."""
        ...

    def signals(self, headers: Mapping[str, str]) -> ProviderSignals:
        """The rate-limit signals of a response's headers (retry-after, limits, remaining)."""
        ...

    def status_hint(self, status: int, settings: ClientSettings, api_key_env: str) -> str:
        """What to check after a non-retryable HTTP `status` ("" when nothing helps)."""
        ...


class SDKProvider:
    """What a provider whose SDK is shaped like the official two shares: importing it, and
    building its two clients (`<client_class>` for batch calls, `Async<client_class>` for online
    calls) from the model args, with the standard rate-limit headers. A subclass names the
    package and client class and adds the batch API, usage and answer readers."""

    package: str
    client_class: str
    """The synchronous client's name in the SDK ("OpenAI"); the asynchronous one adds Async."""
    backend: ClassVar[str]
    """The backend named when the SDK is missing and no other is known ("openai-chat")."""
    takes_default_query: ClassVar[bool] = True
    """Whether the clients take `default_query` (Anthropic's take none: its API needs none)."""

    def sdk(self, backend: str) -> Any:
        """The imported SDK module; a ModelError naming `backend` and the extra to install."""
        try:
            return importlib.import_module(self.package)
        except ImportError:
            raise ModelError(
                f"--model {backend} needs the {self.package} package; install assay[api]."
            ) from None

    def async_client(self, settings: ClientSettings, key: Key, on_response: OnResponse) -> Any:
        """The asynchronous client: no retries of its own (the call runner retries), every
        HTTP answer passed to `on_response`."""
        sdk = self.sdk(self.backend)
        return getattr(sdk, "Async" + self.client_class)(
            **self._client_args(settings, key),
            max_retries=0,
            http_client=sdk.DefaultAsyncHttpxClient(event_hooks={"response": [on_response]}),
        )

    def sync_client(self, settings: ClientSettings, key: Key) -> Any:
        """The synchronous client of batch calls, retrying with the SDK's own backoff."""
        return getattr(self.sdk(self.backend), self.client_class)(
            **self._client_args(settings, key), max_retries=settings.max_retries
        )

    def signals(self, headers: Mapping[str, str]) -> ProviderSignals:
        """The standard rate-limit headers (retry-after, x-ratelimit-*, anthropic-ratelimit-*)."""
        return read_signals(headers)

    def _client_args(self, settings: ClientSettings, key: Key) -> dict[str, Any]:
        args: dict[str, Any] = {
            "api_key": key.reveal(),
            "base_url": settings.base_url,
            "default_headers": settings.default_headers,
            "timeout": settings.timeout,
        }
        if self.takes_default_query:
            args["default_query"] = settings.default_query
        return args


async def classified(
    provider: Provider, sdk: Any, pending: Awaitable[R], timeout: float, hint: Callable[[int], str]
) -> R:
    """Await one SDK call, turning its errors into transient or permanent failures.

    Both official SDKs raise the same three error classes (timeout, connection, status), so one
    classification serves every provider whose SDK follows them; `hint(status)` is added to a
    permanent failure's reason. A 200 whose body the SDK cannot parse (a ValueError: broken
    JSON, a failed validation) or returns as plain text (a body that is not JSON) is an
    `UnreadableAnswer`: paid for, its usage unknown."""
    try:
        answer = await pending
    except sdk.APITimeoutError:
        raise TransientFailure(f"no answer within {timeout:g} s", kind="timeout") from None
    except sdk.APIConnectionError as exc:
        cause = exc.__cause__ or exc
        raise TransientFailure(
            clean_text(f"connection failed: {type(cause).__name__}: {cause}")
        ) from None
    except sdk.APIStatusError as exc:
        status = exc.status_code
        reason = clean_text(f"HTTP {status}: {server_message(exc)}")
        if retryable_status(status):
            signals = provider.signals(exc.response.headers)
            kind: FailureKind = "error"
            if status == 429:
                kind = "rate_limited"
            elif status in OVERLOAD_STATUS:
                kind = "overloaded"
            raise TransientFailure(
                reason, signals.retry_after, kind=kind, signals=signals
            ) from None
        raise PermanentFailure(reason + hint(status)) from None
    except ValueError as exc:  # json.JSONDecodeError and pydantic's ValidationError included
        raise UnreadableAnswer(
            clean_text(f"the server's answer could not be parsed: {type(exc).__name__}: {exc}")
        ) from None
    if isinstance(answer, str | bytes):
        text = answer if isinstance(answer, str) else answer.decode("utf-8", "replace")
        shown = text if len(text) <= 100 else text[:97] + "..."
        raise UnreadableAnswer(clean_text(f"the server's answer is not JSON: {shown!r}"))
    return answer


def credentials_hint(status: int, api_key_env: str) -> str:
    """The hint of a 401 or 403, whichever the provider."""
    if status in (401, 403):
        return (
            f" (the server refused the credentials: put the API key in ${api_key_env}, "
            "or name another variable with api_key_env=)"
        )
    return ""


def server_message(exc: Any) -> str:
    """The human part of an API error body, shortened."""
    body = getattr(exc, "body", None)
    message = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") or inner.get("detail") if isinstance(inner, dict) else inner
        message = message or body.get("detail")
    text = str(message if message else getattr(exc, "message", exc))
    return text if len(text) <= 300 else text[:297] + "..."


def is_loopback(url: str) -> bool:
    """Whether `url` names a server on this machine (localhost, 127.0.0.0/8, ::1)."""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
