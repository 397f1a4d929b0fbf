"""Whether the Hugging Face Hub can be reached: asked once, before any hub library is imported."""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from urllib.parse import urlparse

log = logging.getLogger(__name__)

PROBE_SECONDS = 3.0
LOCAL_BUILDERS = frozenset(
    {"json", "csv", "parquet", "text", "arrow", "pandas", "xml", "sql", "generator", "webdataset"}
)
"""datasets' packaged builders: they read local or URL files, never a hub repository."""
_OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
_lock = threading.Lock()
_decided: list[bool] = []


def needs_hub(repo: str | None) -> bool:
    """Whether loading dataset `repo` asks the hub (not a packaged builder or a local folder)."""
    return bool(repo and repo not in LOCAL_BUILDERS and not os.path.exists(repo))


def offline_unless_reachable() -> bool:
    """Put the hub libraries in offline mode (HF_HUB_OFFLINE=1) when the hub cannot be reached.

    Without it, every dataset or model missing from the local cache costs about 20 s of retries
    before failing; offline, the cache answers at once and a missing entry fails at once with a
    clear message. It only acts before datasets and huggingface_hub are imported (they read the
    variable then), when no offline mode is set and no proxy is configured (a direct probe says
    nothing about a proxy). Returns whether offline mode is on.
    """
    with _lock:
        if not _decided:
            _decided.append(_decide())
        return _decided[0]


def _decide() -> bool:
    if any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on") for v in _OFFLINE_VARS
    ):
        return True
    if "huggingface_hub" in sys.modules or any(os.environ.get(v) for v in _PROXY_VARS):
        return False
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = endpoint.hostname or "huggingface.co", endpoint.port
    port = port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=PROBE_SECONDS).close()
        return False
    except OSError as exc:
        log.warning(
            "the Hugging Face Hub (%s) cannot be reached (%s): datasets and models come from the "
            "local cache only (HF_HUB_OFFLINE=1)",
            host,
            exc.strerror or exc,
        )
        os.environ["HF_HUB_OFFLINE"] = "1"
        return True
