"""Decorator registries: a name maps to a factory; built objects remember their arguments."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from assay.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """Names to factories for one kind of component (filter, metric, model, ...).

    Built-in entries are declared lazily as "module:attr" strings by `lazy()`, so listing names
    never imports heavy modules; the module is imported the first time the name is looked up.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._lazy: dict[str, str] = {}

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
            importlib.import_module(self._lazy.pop(name))
        if name not in self._entries:
            raise UnknownNameError(self.kind, name, self.names())
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries or name in self._lazy

    def names(self) -> list[str]:
        """All registered names, sorted."""
        return sorted({*self._entries, *self._lazy})

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


def describe_call(name: str, kwargs: dict[str, Any]) -> str:
    """`regex(regex_pattern='...')`: how results files say which component produced a number."""
    args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    return f"{name}({args})"
