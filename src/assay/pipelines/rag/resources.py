"""Objects built once per experiment and shared by every config that asks for the same thing.

Indexes, embedding models, rerankers and few-shot selectors are keyed by the fingerprint of the
settings that determine them, so a grid over retrieval depth or sampling temperature builds one
index, and a grid over chunk size builds one index per chunk size.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from assay.pipelines.configs.fingerprint import fingerprint

T = TypeVar("T")


class SharedResources:
    """A keyed store of built objects, with a count of builds per kind."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str], Any] = {}
        self._lock = threading.RLock()
        self.builds: Counter[str] = Counter()
        """Builds per kind ("index", "embeddings", ...): how much work sharing saved."""

    def get(self, kind: str, settings: Any, factory: Callable[[], T]) -> T:
        """The object of `kind` built from `settings`, building it with `factory` the first time."""
        key = (kind, fingerprint(settings))
        with self._lock:
            if key not in self._items:
                self._items[key] = factory()
                self.builds[kind] += 1
            return self._items[key]
