"""The two providers' batch endpoints behind `batches.BatchProvider`.

- `OpenAIBatches`: upload a JSONL file to /files (purpose `batch`), create /batches for one
  endpoint with a 24 h completion window, poll it, read its output and error files
  (/files/{id}/content); limits 50,000 requests and 200 MB per file. A batch's requests can be
  read back from its input file (`contents`), which repairs a journal file that was lost.
- `AnthropicBatches`: create /v1/messages/batches with the requests inline, poll it, stream its
  results_url JSONL; limits 100,000 requests or 256 MB per batch. Which requests a batch holds
  is known only from its results.

Both take a synchronous client of the official SDK (built by the backend, retries included:
these calls are cheap and repeatable) and turn its errors into ModelErrors with the API key
redacted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from assay.errors import ModelError
from assay.models.api.batches import BatchLimits, BatchStatus, ItemResult
from assay.models.api.runner import retryable_status

OPENAI_LIMITS = BatchLimits(max_requests=50_000, max_bytes=200 * 1024 * 1024)
ANTHROPIC_LIMITS = BatchLimits(max_requests=100_000, max_bytes=256 * 1024 * 1024)


class _Provider:
    """What both providers share: a client, messages that name the server, error translation."""

    name: str
    route: str
    limits: BatchLimits

    def __init__(self, client: Any, sdk: Any, base_url: str, redact: Callable[[str], str]) -> None:
        self._client = client
        self._sdk = sdk
        self.base_url = base_url.rstrip("/")
        self._redact = redact

    def _error(self, what: str, exc: Exception) -> ModelError:
        """A ModelError saying which call failed and how (the key never shown)."""
        status = getattr(exc, "status_code", None)
        how = (
            f"answered HTTP {status}: {getattr(exc, 'message', exc)}"
            if status
            else f"failed: {exc}"
        )
        return ModelError(self._redact(f"{self.name}: {what} {how}"))

    def _call(self, what: str, call: Callable[[], Any]) -> Any:
        """`call()`, its SDK errors turned into a ModelError naming `what` was asked."""
        try:
            return call()
        except (self._sdk.APIStatusError, self._sdk.APIConnectionError) as exc:
            raise self._error(what, exc) from None

    def _check(self, what: str, call: Callable[[], Any]) -> None:
        """Refuse a server whose batch endpoint does not exist (`call` lists its batches)."""
        try:
            call()
        except self._sdk.APIStatusError as exc:
            if exc.status_code in (404, 405, 501):
                raise ModelError(
                    f"--batch-api: {self.base_url} has no batch API ({what} answered HTTP "
                    f"{exc.status_code}); drop --batch-api (or batch_api=true) for this server, "
                    "which then receives the requests one by one."
                ) from None
            raise self._error(what, exc) from None
        except self._sdk.APIConnectionError as exc:
            raise self._error(what, exc) from None

    def _lookup(self, what: str, call: Callable[[], Any]) -> Any | None:
        """`call()`, or None when the server says the object does not exist (404)."""
        try:
            return call()
        except self._sdk.NotFoundError:
            return None
        except (self._sdk.APIStatusError, self._sdk.APIConnectionError) as exc:
            raise self._error(what, exc) from None


class OpenAIBatches(_Provider):
    """OpenAI's Batch API for one endpoint (/v1/chat/completions or /v1/completions)."""

    def __init__(
        self,
        client: Any,
        sdk: Any,
        base_url: str,
        endpoint: str,
        redact: Callable[[str], str],
        limits: BatchLimits = OPENAI_LIMITS,
    ) -> None:
        super().__init__(client, sdk, base_url, redact)
        self.endpoint = endpoint
        self.limits = limits
        self.name = f"OpenAI Batch API at {self.base_url}"
        self.route = f"{self.base_url} {endpoint}"

    def check(self) -> None:
        self._check("GET /batches", lambda: self._client.batches.list(limit=1))

    def line(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"custom_id": custom_id, "method": "POST", "url": self.endpoint, "body": body}

    def submit(self, lines: list[bytes]) -> str:
        data = b"\n".join(lines) + b"\n"
        uploaded = self._call(
            "uploading the batch input (POST /files)",
            lambda: self._client.files.create(file=("assay-batch.jsonl", data), purpose="batch"),
        )
        batch = self._call(
            "creating the batch (POST /batches)",
            lambda: self._client.batches.create(
                input_file_id=uploaded.id, endpoint=self.endpoint, completion_window="24h"
            ),
        )
        return str(batch.id)

    def status(self, batch_id: str) -> BatchStatus | None:
        batch = self._lookup(
            f"GET /batches/{batch_id}", lambda: self._client.batches.retrieve(batch_id)
        )
        if batch is None:
            return None
        counts = batch.request_counts
        shown = (
            {"completed": counts.completed, "failed": counts.failed, "total": counts.total}
            if counts is not None
            else {}
        )
        problem = None
        if batch.status == "failed":
            errors = getattr(batch.errors, "data", None) or []
            problem = "; ".join(
                f"{e.message}" + (f" (line {e.line})" if e.line is not None else "")
                for e in errors[:3]
            )
            problem = problem or "the provider gave no reason"
        ended = batch.status in ("completed", "failed", "expired", "cancelled")
        return BatchStatus(batch.status, ended, shown, problem, float(batch.created_at))

    def _download(self, batch_id: str, file_id: str) -> str:
        return str(
            self._call(
                f"downloading file {file_id} of batch {batch_id}",
                lambda: self._client.files.content(file_id).text,
            )
        )

    def results(self, batch_id: str) -> Iterator[tuple[str, ItemResult]]:
        batch = self._call(
            f"GET /batches/{batch_id}", lambda: self._client.batches.retrieve(batch_id)
        )
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            text = self._download(batch_id, file_id)
            for raw in text.splitlines():
                if raw.strip():
                    record = json.loads(raw)
                    yield str(record.get("custom_id")), _openai_item(record, batch.status)

    def contents(self, batch_id: str) -> tuple[str, list[str]] | None:
        """The batch's endpoint and custom ids, read back from its input file (None when the
        file is gone)."""
        batch = self._call(
            f"GET /batches/{batch_id}", lambda: self._client.batches.retrieve(batch_id)
        )
        text = self._lookup(
            f"downloading input file {batch.input_file_id} of batch {batch_id}",
            lambda: self._client.files.content(batch.input_file_id).text,
        )
        if text is None:
            return None
        ids = [str(json.loads(raw).get("custom_id")) for raw in text.splitlines() if raw.strip()]
        return f"{self.base_url} {batch.endpoint}", ids


def _openai_item(record: dict[str, Any], batch_state: str) -> ItemResult:
    """One line of an OpenAI batch's output or error file."""
    response = record.get("response") or {}
    error = record.get("error")
    status = response.get("status_code")
    if status == 200 and isinstance(response.get("body"), dict):
        return ItemResult(response["body"])
    if error:
        code = str(error.get("code") or "")
        retryable = code in ("batch_expired", "batch_cancelled") or batch_state in (
            "expired",
            "cancelled",
        )
        return ItemResult(None, f"{code or 'error'}: {error.get('message', '')}".strip(), retryable)
    body = response.get("body")
    inner = body.get("error", body) if isinstance(body, dict) else body
    message = inner.get("message") if isinstance(inner, dict) else inner
    status = int(status) if isinstance(status, int) else 0
    return ItemResult(None, f"HTTP {status}: {message}", retryable_status(status))


class AnthropicBatches(_Provider):
    """Anthropic's Message Batches (/v1/messages/batches)."""

    def __init__(
        self,
        client: Any,
        sdk: Any,
        base_url: str,
        redact: Callable[[str], str],
        limits: BatchLimits = ANTHROPIC_LIMITS,
    ) -> None:
        super().__init__(client, sdk, base_url, redact)
        self.limits = limits
        self.name = f"Anthropic Message Batches at {self.base_url}"
        self.route = f"{self.base_url} /v1/messages"

    def check(self) -> None:
        self._check("GET /v1/messages/batches", lambda: self._client.messages.batches.list(limit=1))

    def line(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"custom_id": custom_id, "params": body}

    def submit(self, lines: list[bytes]) -> str:
        requests = [json.loads(line) for line in lines]
        batch = self._call(
            "creating the batch (POST /v1/messages/batches)",
            lambda: self._client.messages.batches.create(requests=requests),
        )
        return str(batch.id)

    def status(self, batch_id: str) -> BatchStatus | None:
        batch = self._lookup(
            f"GET /v1/messages/batches/{batch_id}",
            lambda: self._client.messages.batches.retrieve(batch_id),
        )
        if batch is None:
            return None
        counts = batch.request_counts.model_dump()
        shown = {k: int(v) for k, v in counts.items() if v}
        ended = batch.processing_status == "ended"
        created = batch.created_at.timestamp() if batch.created_at is not None else None
        return BatchStatus(batch.processing_status, ended, shown, created=created)

    def contents(self, batch_id: str) -> tuple[str, list[str]] | None:
        """None: a message batch tells its requests only in its results, once it has ended."""
        return None

    def results(self, batch_id: str) -> Iterator[tuple[str, ItemResult]]:
        stream = self._call(
            f"downloading the results of batch {batch_id}",
            lambda: self._client.messages.batches.results(batch_id),
        )
        for item in stream:
            yield str(item.custom_id), _anthropic_item(item.result)


_ANTHROPIC_TRANSIENT = frozenset({"api_error", "overloaded_error", "rate_limit_error"})


def _anthropic_item(result: Any) -> ItemResult:
    """One result of an Anthropic message batch."""
    kind = result.type
    if kind == "succeeded":
        return ItemResult(result.message.model_dump(mode="json"))
    if kind in ("expired", "canceled"):
        return ItemResult(None, f"the request {kind} before it was processed", True)
    error = getattr(getattr(result, "error", None), "error", None)
    error_type = str(getattr(error, "type", "error"))
    message = str(getattr(error, "message", ""))
    return ItemResult(None, f"{error_type}: {message}", error_type in _ANTHROPIC_TRANSIENT)


__all__ = ["ANTHROPIC_LIMITS", "OPENAI_LIMITS", "AnthropicBatches", "OpenAIBatches"]
