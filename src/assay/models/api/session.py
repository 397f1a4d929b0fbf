"""One API backend's connection to its provider: SDK clients built once and reused.

An asynchronous SDK client holds a pool of connections bound to the event loop that opened
them, so reusing it across calls needs one loop that outlives them: `Session` keeps a private
loop on a daemon thread and runs every batch of calls there. The client, its TLS context and
its open connections are made once per backend, not once per `generate_until` (an agent's
rounds, a judge's tasks, an executor's chunks each called it anew).

`close` (the backend's `LM.close`, which the run calls on the backends it built) closes the
clients and ends the thread. The thread is a daemon all the same, so that a backend nobody
closes (a user's own object) never keeps the interpreter from exiting.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_CANCEL_WAIT = 30.0
"""Seconds an interrupted run of calls is given to wind down (its calls cancelled, their
`finally` blocks run) before the interrupt goes on."""


class Session:
    """A private event loop and the clients built on it, each made on first use."""

    def __init__(self, make_client: Callable[[], Any], make_sync_client: Callable[[], Any]) -> None:
        self._make_client = make_client
        self._make_sync_client = make_sync_client
        self._client: Any = None
        self._sync_client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def client(self) -> Any:
        """The asynchronous client (call from a coroutine that `run` runs)."""
        if self._client is None:
            self._client = self._make_client()
        return self._client

    def sync_client(self) -> Any:
        """The synchronous client (batch calls)."""
        with self._lock:
            if self._sync_client is None:
                self._sync_client = self._make_sync_client()
            return self._sync_client

    def run(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run the coroutine `make()` on the session's loop and return its result.

        An interrupt (Ctrl-C) while waiting cancels the coroutine and waits for it to wind down
        before it propagates, as `asyncio.run` would; so does any other exception of the caller.
        """
        done = threading.Event()

        async def guarded() -> T:
            try:
                return await make()
            except (KeyboardInterrupt, SystemExit) as exc:
                # Raised in a task, these would stop the loop itself and leave the caller
                # waiting for ever: they travel to the caller as a value instead.
                raise _Escaped(exc) from None
            finally:
                done.set()

        future = asyncio.run_coroutine_threadsafe(guarded(), self._started_loop())
        try:
            return future.result()
        except _Escaped as escaped:
            raise escaped.original from None
        except BaseException:
            future.cancel()
            done.wait(_CANCEL_WAIT)
            raise

    def close(self) -> None:
        """Close the clients, stop the loop and wait for its thread to end (a later `run`
        starts a new one)."""
        with self._lock:
            loop, self._loop = self._loop, None
            thread, self._thread = self._thread, None
            client, self._client = self._client, None
            sync_client, self._sync_client = self._sync_client, None
        if sync_client is not None:
            sync_client.close()
        if loop is None or thread is None:
            return
        try:
            if client is not None:
                asyncio.run_coroutine_threadsafe(client.close(), loop).result(_CANCEL_WAIT)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(_CANCEL_WAIT)
            if not thread.is_alive():
                loop.close()

    def _started_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="assay-api-calls", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def __getstate__(self) -> dict[str, Any]:
        # A loop, a thread and open connections do not travel (Ray, multiprocessing): a copy
        # builds its own on first use.
        return {"_make_client": self._make_client, "_make_sync_client": self._make_sync_client}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["_make_client"], state["_make_sync_client"])  # type: ignore[misc]


class _Escaped(Exception):
    """A KeyboardInterrupt or SystemExit raised on the session's loop, on its way out."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(repr(original))
        self.original = original
