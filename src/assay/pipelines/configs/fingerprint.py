"""Config fingerprints: a stable hash of everything that decides what a config computes.

An experiment resumes a config from its stored shards only when the fingerprint of the config
asked for equals the stored one, so the fingerprint must change whenever the config could behave
differently, at any depth: a RAG spec's search ``k`` inside the model config, a splitter's chunk
size, a reranker's ``top_n``, the body of a user function, a constant or helper function that
user function reads, a default argument, a closed-over value. It must also be the same in
another process for the same config (no memory addresses, no set iteration order), or resume
would redo work.

Values are encoded into a canonical JSON structure, every container tagged with its kind, and
hashed:

- plain values as themselves; dicts as sorted key/value pairs; sets sorted;
- `List` / `Range` knobs and `Configurable` objects (model configs, RAG specs, prompt managers)
  by their type and constructor arguments;
- functions by module, qualified name, compiled code (bytecode, constants, names used; not line
  numbers, so moving a function in a notebook keeps its fingerprint), defaults, closure and the
  module globals the code reads: the user's own helper functions (same notebook or script, or a
  module of theirs, including what the code reads from an imported module of theirs)
  recursively, library functions and modules (standard library, installed packages, assay) by
  name;
- classes by qualified name; other objects by type and their pickled state (``__reduce_ex__``,
  which covers ``__dict__``, ``__slots__``, pydantic models, numpy arrays, partials);
  tensors by dtype, shape and, up to a million elements, their bytes (larger tensors are model
  weights, identified by the model name their owner's settings carry);
- anything that cannot be inspected (locks, generators, native handles) by its type alone.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import sysconfig
import types
from collections.abc import Mapping
from typing import Any

from assay.pipelines.configs.knobs import Configurable, List, Range

_MAX_HASHED_TENSOR = 1 << 20
"""Tensors with more elements are identified by dtype and shape only (see module docstring)."""


def fingerprint(value: Any) -> str:
    """A stable hash of `value` (see the module docstring): identifies a config across runs."""
    text = json.dumps(identity_value(value), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def identity_value(value: Any) -> Any:
    """The canonical JSON structure `fingerprint` hashes."""
    return _Encoder().encode(value)


IDENTITY_MODULES = {
    "assay.pipelines.configs.api_models": "assay.pipelines.api_models",
    "assay.pipelines.configs.eval_config": "assay.pipelines.eval_config",
    "assay.pipelines.configs.fingerprint": "assay.pipelines.fingerprint",
    "assay.pipelines.configs.knobs": "assay.pipelines.knobs",
    "assay.pipelines.configs.model_configs": "assay.pipelines.model_configs",
    "assay.pipelines.configs.optuna_search": "assay.pipelines.optuna_search",
    "assay.pipelines.configs.search": "assay.pipelines.search",
    "assay.pipelines.experiment.cloning": "assay.pipelines.clone_payload",
    "assay.pipelines.experiment.control": "assay.pipelines.experiment_control",
    "assay.pipelines.experiment.control_panel": "assay.pipelines.control_panel",
    "assay.pipelines.experiment.display": "assay.pipelines.display",
    "assay.pipelines.experiment.experiment": "assay.pipelines.experiment",
    "assay.pipelines.experiment.headers": "assay.pipelines.headers",
    "assay.pipelines.experiment.log": "assay.pipelines.experiment_log",
    "assay.pipelines.experiment.persistence": "assay.pipelines.experiment_persistence",
    "assay.pipelines.experiment.restore": "assay.pipelines.restore",
    "assay.pipelines.experiment.shard_runner": "assay.pipelines.experiment_runner",
    "assay.pipelines.experiment.state": "assay.pipelines.experiment_state",
    "assay.pipelines.experiment.table": "assay.pipelines.experiment_table",
    "assay.pipelines.experiment.views": "assay.pipelines.experiment_views",
    "assay.pipelines.rag.embeddings": "assay.pipelines.embeddings",
    "assay.pipelines.rag.fewshot_prompts": "assay.pipelines.prompt_manager",
    "assay.pipelines.rag.resources": "assay.pipelines.resources",
    "assay.pipelines.rag.retrieval": "assay.pipelines.retrieval",
    "assay.pipelines.rag.spec": "assay.pipelines.rag",
    "assay.pipelines.row_metrics": "assay.pipelines.metrics",
    "assay.pipelines.shards.batch": "assay.pipelines.batch",
    "assay.pipelines.shards.early_stop": "assay.pipelines.early_stop",
    "assay.pipelines.shards.engines": "assay.pipelines.engines",
    "assay.pipelines.shards.live_metrics": "assay.pipelines.online",
    "assay.pipelines.shards.scheduler": "assay.pipelines.scheduler",
    "assay.pipelines.shards.split": "assay.pipelines.data",
    "assay.pipelines.shards.store": "assay.pipelines.store",
}
"""Modules of assay.pipelines by the name they had when it was one flat package. Identities
name classes and functions by module, and stores match configs by identity: a store written
before the split into sub-packages must still resume its configs."""


IDENTITY_NAMES = {"assay.pipelines.row_metrics.exact_match_per_row": "exact_match"}
"""Functions of assay.pipelines by the name they had before (their closures carry it)."""


def _qualname(obj: Any) -> str:
    module = getattr(obj, "__module__", "")
    outer, dot, inner = getattr(obj, "__qualname__", type(obj).__name__).partition(".")
    outer = IDENTITY_NAMES.get(f"{module}.{outer}", outer)
    return f"{IDENTITY_MODULES.get(module, module)}.{outer}{dot}{inner}"


def _sort_key(encoded: Any) -> str:
    return json.dumps(encoded, sort_keys=True)


class _Encoder:
    """One fingerprint's walk: memoises shared objects and marks cycles."""

    def __init__(self) -> None:
        # id -> (object, encoding); the object is held so that its id is not reused by a
        # temporary (reduce tuples, state dicts) created later in the walk.
        self._memo: dict[int, tuple[Any, Any]] = {}
        self._active: set[int] = set()

    def encode(self, value: Any) -> Any:
        if value is None or isinstance(value, bool | int | str):
            return value
        if isinstance(value, float):
            # JSON has no NaN or infinity; repr keeps them distinct from strings by the tag.
            return (
                value if value == value and abs(value) != float("inf") else ["float", repr(value)]
            )
        key = id(value)
        if key in self._memo:
            return self._memo[key][1]
        if key in self._active:
            return ["cycle", _qualname(type(value))]
        self._active.add(key)
        try:
            encoded = self._encode_object(value)
        finally:
            self._active.discard(key)
        self._memo[key] = (value, encoded)
        return encoded

    def _encode_object(self, value: Any) -> Any:
        if isinstance(value, bytes | bytearray | memoryview):
            return ["bytes", hashlib.sha256(bytes(value)).hexdigest()]
        if isinstance(value, List):
            return ["List", [self.encode(v) for v in value.values]]
        if isinstance(value, Range):
            return ["Range", self.encode(vars(value))]
        if isinstance(value, Configurable):
            return ["config", _qualname(type(value)), self.encode(value.knob_params())]
        if isinstance(value, Mapping):
            pairs = [[self.encode(k), self.encode(v)] for k, v in value.items()]
            return ["dict", sorted(pairs, key=lambda p: _sort_key(p[0]))]
        if isinstance(value, list | tuple):
            return ["list", [self.encode(v) for v in value]]
        if isinstance(value, set | frozenset):
            return ["set", sorted((self.encode(v) for v in value), key=_sort_key)]
        if isinstance(value, type):
            return ["class", _qualname(value)]
        if isinstance(value, types.ModuleType):
            return ["module", value.__name__]
        if isinstance(value, types.MethodType):
            return ["method", self.encode(value.__self__), self.encode(value.__func__)]
        if isinstance(value, types.FunctionType):
            return self._function(value)
        if isinstance(value, types.CodeType):
            return self._code(value)
        if isinstance(value, types.BuiltinFunctionType | types.BuiltinMethodType):
            owner = getattr(value, "__self__", None)
            bound = None if owner is None or isinstance(owner, types.ModuleType) else owner
            return ["builtin", _qualname(value), self.encode(bound)]
        if hasattr(value, "data_ptr") and hasattr(value, "shape"):
            return self._tensor(value)
        return self._state(value)

    def _function(self, fn: types.FunctionType) -> Any:
        code = fn.__code__
        closure = [self.encode(_cell(c)) for c in fn.__closure__ or ()]
        return [
            "function",
            _qualname(fn),
            self._code(code),
            self.encode(fn.__defaults__),
            self.encode(fn.__kwdefaults__),
            closure,
            self._globals_read(fn, code),
        ]

    def _code(self, code: types.CodeType) -> Any:
        consts = [
            self._code(c) if isinstance(c, types.CodeType) else self.encode(c)
            for c in code.co_consts
        ]
        return [
            "code",
            hashlib.sha256(code.co_code + code.co_exceptiontable).hexdigest(),
            consts,
            list(code.co_names),
            code.co_argcount,
            code.co_kwonlyargcount,
            code.co_flags,
        ]

    def _globals_read(self, fn: types.FunctionType, code: types.CodeType) -> Any:
        """The module globals `fn`'s code reads, by name (builtins are not module globals)."""
        names = sorted(_names(code))
        found: list[list[Any]] = []
        for name in names:
            if name not in fn.__globals__:
                continue
            value = fn.__globals__[name]
            if isinstance(value, types.FunctionType) and not _is_user_module(value.__module__):
                # Library functions: their name is their identity (their code is the library's).
                found.append([name, ["function", _qualname(value)]])
            elif isinstance(value, types.ModuleType) and _is_user_module(value.__name__):
                # A user module (``import helpers``): what the code reads from it.
                read = [[n, self.encode(getattr(value, n))] for n in names if hasattr(value, n)]
                found.append([name, ["module", value.__name__, read]])
            else:
                found.append([name, self.encode(value)])
        return found

    def _tensor(self, value: Any) -> Any:
        shape = [int(d) for d in value.shape]
        out = ["tensor", _qualname(type(value)), str(value.dtype), shape]
        numel = 1
        for d in shape:
            numel *= d
        if numel <= _MAX_HASHED_TENSOR:
            try:
                data = value.detach().cpu().contiguous().numpy().tobytes()
            except Exception:  # not a torch tensor (or a dtype numpy lacks): shape only
                return out
            out.append(hashlib.sha256(data).hexdigest())
        return out

    def _state(self, value: Any) -> Any:
        """An object by its type and the state pickling would save."""
        kind = _qualname(type(value))
        try:
            reduced = value.__reduce_ex__(4)
        except Exception:  # unpicklable (locks, generators, native handles): type alone
            return ["object", kind]
        if isinstance(reduced, str):  # a module-level singleton, pickled by name
            return ["object", kind, reduced]
        # (callable, args, state, list items, dict items); the callable is a library's
        # reconstructor, named; the items are iterators, read into lists.
        parts = [
            self.encode(list(part) if i >= 3 and part is not None else part)
            for i, part in enumerate(reduced[1:], start=1)
        ]
        return ["object", kind, _qualname(reduced[0]), parts]


@functools.cache
def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    keys = ("stdlib", "platstdlib", "purelib", "platlib")
    return tuple(os.path.realpath(paths[k]) + os.sep for k in keys if k in paths)


def _is_user_module(name: str) -> bool:
    """Whether module `name` is the user's code (a notebook, a script, a module of theirs),
    as opposed to the standard library, an installed package or assay itself: user code is
    identified by its content, library code by its name."""
    if name == "__main__":
        return True
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    if not path or name.split(".")[0] == "assay":
        return False
    return not os.path.realpath(path).startswith(_library_roots())


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # a closure variable not yet assigned
        return None


def _names(code: types.CodeType) -> set[str]:
    """Global (and attribute) names used by `code` and the code nested in it."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names
