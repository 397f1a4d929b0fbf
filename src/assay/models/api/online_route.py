"""An API backend's online calls: each request sent on its own through the provider's SDK.

`OnlineCalls` is the part of a backend that sends: the API key, the `Session` whose SDK clients
are built once (the asynchronous one shows every HTTP answer's rate-limit headers to the
pacer), and the `CallRunner` that paces, retries and admits each call under the spending limit
the backend was built with. `run` sends calls, filing answers in the response cache as they
arrive; `gather` turns what became of them into per-request answers, or the error that names
what failed. `batch_route` is the other way a backend's requests go.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from assay.errors import ConfigError
from assay.models.api.arrivals import Arrivals
from assay.models.api.budget import SpendingLimit
from assay.models.api.gathering import gather
from assay.models.api.pacing import Limits, Pacer
from assay.models.api.provider import Key, Provider, classified, is_loopback
from assay.models.api.runner import CallOutcome, CallRunner, RetryPolicy
from assay.models.api.session import Session
from assay.models.api.settings import APISettings
from assay.models.api.usage import UsageMeter, model_prices
from assay.util.redact import redact_url

log = logging.getLogger(__name__)
R = TypeVar("R")


class OnlineCalls:
    """The key, clients, pacing, retries, usage and spending limit of one backend's calls."""

    def __init__(
        self,
        name: str,
        provider: Provider,
        settings: APISettings,
        spending: SpendingLimit | None,
    ) -> None:
        s = settings
        self.name, self.provider, self.settings = name, provider, settings
        self.key = Key(os.environ.get(s.api_key_env))
        self.pacer = Pacer(s.num_concurrent, Limits(s.rpm, s.tpm, s.itpm, s.otpm))
        self.meter = UsageMeter(
            model_prices(s.model, s.price_in, s.price_out, s.price_cached_in, s.batch_discount)
        )
        self.runner = CallRunner(
            name,
            self.pacer,
            RetryPolicy(s.max_retries, max_wait=s.max_wait),
            self.meter,
            spending=spending,
            model=s.model,
        )
        self.session = Session(self._async_client, self._sync_client)

    def run(
        self,
        n_calls: int,
        send: Callable[[Any, int], Awaitable[Any]],
        read: Callable[[int, Any], R],
        tokens: Callable[[int], tuple[float, float]],
        arrivals: Arrivals | None = None,
    ) -> CallOutcome[R]:
        """`read(j, await send(client, j))` for every j, by the runner on the session's client.

        `tokens(j)` is call j's (prompt tokens, requested output tokens), for token rate limits.
        `arrivals`, which `read` files its answers in, is committed every window meanwhile and
        once more at the end, whatever ends the run (an interrupt included).
        """
        if n_calls == 0:
            return CallOutcome([])
        self.require_key()
        provider = self.provider
        sdk, timeout = provider.sdk(self.name), self.settings.timeout

        def hint(status: int) -> str:
            return provider.status_hint(status, self.settings, self.settings.api_key_env)

        async def run() -> CallOutcome[R]:
            client = self.session.client()
            flushing = asyncio.create_task(arrivals.keep_flushing()) if arrivals else None
            try:
                return await self.runner.run(
                    n_calls,
                    lambda j: classified(provider, sdk, send(client, j), timeout, hint),
                    read,
                    usage=provider.usage,
                    tokens=tokens,
                )
            finally:
                if flushing is not None:
                    flushing.cancel()

        try:
            outcome = self.session.run(run)
        finally:
            if arrivals is not None:
                arrivals.flush()
        if outcome.retries:
            log.info(
                "%s: %d attempt(s) repeated, %d of them after a 429/529",
                self.name,
                outcome.retries,
                outcome.rate_limited,
            )
        return outcome

    def gather(
        self,
        outcome: CallOutcome[Any],
        owners: list[list[int]],
        combine: Callable[[list[Any]], R],
        what: str,
        hint: str,
    ) -> list[R]:
        """Per request, `combine` of the answers of its calls `owners[i]` (see
        `gathering.gather`: the error that names the failed requests, or the spending limit)."""
        return gather(
            outcome,
            owners,
            combine,
            backend=self.name,
            server=redact_url(self.settings.base_url),
            what=what,
            hint=hint,
            spending=self.runner.spending,
        )

    def require_key(self) -> None:
        """Refuse, before the first request, to send requests without a key to a server that
        is not on this machine (local servers ignore the key)."""
        s = self.settings
        if self.key.given or is_loopback(s.base_url):
            return
        raise ConfigError(
            f"--model {self.name}: no API key for {redact_url(s.base_url)}: the environment "
            f"variable {s.api_key_env} is not set. Set it (export {s.api_key_env}=...), or name "
            "the variable that holds the key with api_key_env=NAME in --model-args; for a "
            f"server that needs no key, set {s.api_key_env} to any value."
        )

    def close(self) -> None:
        """Close the SDK clients and stop the session's event loop (a later call opens them
        again)."""
        self.session.close()

    def _async_client(self) -> Any:
        return self.provider.async_client(self.settings, self.key, self._observe)

    def _sync_client(self) -> Any:
        return self.provider.sync_client(self.settings, self.key)

    async def _observe(self, response: Any) -> None:
        """Every HTTP answer: the provider's rate-limit headers go to the pacer."""
        self.pacer.observe(self.provider.signals(response.headers))
