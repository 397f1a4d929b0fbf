"""Component registries: a name maps to a factory; built objects remember their arguments.

Three sources fill a registry, in this order of precedence:

1. `@register(name)`: a decorator run when its module is imported (built-ins and user code);
2. `lazy(name, module)`: built-ins declared by module, imported the first time the name is used,
   so listing names never imports heavy modules;
3. entry points of the registry's group (`assay.metrics`, `assay.filters`, `assay.models`):
   installed third-party plugins, read only when a name is not found otherwise or when names are
   listed. An entry point `name = "pkg.module:factory"` registers `factory` under `name`; one
   that names a module (`name = "pkg.module"`) is imported and must register `name` itself.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterator
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any, Generic, TypeVar

from assay.errors import ConfigError, UnknownNameError

T = TypeVar("T")

log = logging.getLogger(__name__)


class ComponentRegistry(Generic[T]):
    """Names to factories for one kind of component (filter, metric, model, ...).

    Args:
        kind: what the components are, for messages ("metric").
        group: the entry-point group plugins register in ("assay.metrics"); None: no plugins.
    """

    def __init__(self, kind: str, group: str | None = None) -> None:
        self.kind = kind
        self.group = group
        self._entries: dict[str, T] = {}
        self._lazy: dict[str, str] = {}
        self._plugins: dict[str, EntryPoint] | None = None

    def register(self, name: str, *aliases: str) -> Callable[[T], T]:
        """Decorator registering `obj` under `name` (and aliases)."""

        def decorate(obj: T) -> T:
            for key in (name, *aliases):
                self._entries[key] = obj
                self._lazy.pop(key, None)
            return obj

        return decorate

    def lazy(self, name: str, module: str) -> None:
        """Declare that importing `module` registers `name`."""
        if name not in self._entries:
            self._lazy[name] = module

    def get(self, name: str) -> T:
        """The factory for `name`, or an UnknownNameError listing close matches."""
        if name not in self._entries and name in self._lazy:
            # Forget the lazy entry only once its module imported: a failed import (a missing
            # optional dependency) must leave the name known, so the next use says why again.
            importlib.import_module(self._lazy[name])
            self._lazy.pop(name, None)
        if name not in self._entries and name in self._plugin_entry_points():
            self._load_plugin(name)
        if name not in self._entries:
            raise UnknownNameError(self.kind, name, self.names())
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        if name in self._entries or name in self._lazy:
            return True
        return isinstance(name, str) and name in self._plugin_entry_points()

    def names(self) -> list[str]:
        """All registered names (plugins included), sorted."""
        return sorted({*self._entries, *self._lazy, *self._plugin_entry_points()})

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def _plugin_entry_points(self) -> dict[str, EntryPoint]:
        """The group's installed entry points by name, read once; built-in names win."""
        if self._plugins is None:
            found = entry_points(group=self.group) if self.group else ()
            self._plugins = {ep.name: ep for ep in found}
        return self._plugins

    def _load_plugin(self, name: str) -> None:
        entry = self._plugin_entry_points()[name]
        where = f"{self.kind} plugin {name!r} ({entry.value}, entry point group {self.group})"
        try:
            loaded = entry.load()
        except Exception as exc:
            raise ConfigError(
                f"{where} failed to load: {type(exc).__name__}: {exc}. Fix or uninstall "
                f"{entry.dist.name if entry.dist else 'the package that declares it'}."
            ) from exc
        if name in self._entries:  # the module registered the name itself
            return
        if isinstance(loaded, ModuleType):
            raise ConfigError(
                f"{where}: importing the module did not register {name!r}; point the entry point "
                f"at the factory ('module:attr') or decorate it with the {self.kind} register "
                "decorator."
            )
        log.debug("loaded %s", where)
        self._entries[name] = loaded


def describe_call(name: str, kwargs: dict[str, Any]) -> str:
    """`regex(regex_pattern='...')`: how results files say which component produced a number."""
    args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    return f"{name}({args})"
