"""Reading lm-eval YAML files: `!function` tags, `include` inheritance with cycle detection."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from assay.errors import TaskConfigError
from assay.sandbox.code_eval import serving_task_module


@dataclass(frozen=True)
class FunctionRef:
    """A `!function module.attr` reference, resolved next to the YAML file that names it."""

    dotted: str
    yaml_file: Path

    @property
    def yaml_dir(self) -> Path:
        """The folder of the YAML that names the function: its module is looked up there."""
        return self.yaml_file.parent

    def _parts(self) -> tuple[list[str], str]:
        *module_parts, attr = self.dotted.split(".")
        if not module_parts or not all(module_parts) or not attr:
            raise TaskConfigError(
                f"{self.yaml_file}: '!function {self.dotted}' must be 'module.function' "
                "(e.g. '!function utils.process_docs')."
            )
        return module_parts, attr

    def module_file(self) -> Path:
        """The .py file beside the YAML that defines the function (it may not exist)."""
        module_parts, _ = self._parts()
        return self.yaml_dir.joinpath(*module_parts).with_suffix(".py")

    def resolve(self) -> Any:
        """Import the module (the .py file beside the YAML first) and return the attribute."""
        module_parts, attr = self._parts()
        local = self.module_file()
        if local.is_file():
            # A name stable across runs: datasets fingerprints process_docs functions by their
            # module, so a per-process name (str hashes are salted) made every run miss its
            # cached map() and write another copy of the processed dataset.
            digest = hashlib.sha256(str(local.resolve()).encode()).hexdigest()[:16]
            key = f"assay_user_{digest}_{'_'.join(module_parts)}"
            module = sys.modules.get(key)
            if module is None:
                spec = importlib.util.spec_from_file_location(key, local)
                assert spec and spec.loader
                module = importlib.util.module_from_spec(spec)
                from assay.tasks.runtime_guard import CodeRunRefused, importing_task_file

                try:
                    # A module that loads evaluate's code_eval gets the sandboxed one; the
                    # module's own code runs under the runtime guard from its first line.
                    with serving_task_module(local), importing_task_file(local, self.yaml_file):
                        spec.loader.exec_module(module)
                except CodeRunRefused:
                    raise
                # SystemExit too: some task modules call sys.exit when a tool is missing.
                except (Exception, SystemExit) as exc:
                    raise TaskConfigError(_import_failure(local, self.dotted, exc)) from None
                sys.modules[key] = module
        else:
            _refuse_unnamed_code(self.dotted, ".".join(module_parts), local)
            self._refuse_foreign(local)
            try:
                module = importlib.import_module(".".join(module_parts))
            except (ImportError, ValueError):
                raise TaskConfigError(
                    f"{self.yaml_file}: '!function {self.dotted}': no file {local.name} next to the "
                    "YAML and no importable module of that name."
                ) from None
        try:
            return getattr(module, attr)
        except AttributeError:
            raise TaskConfigError(
                f"{local}: '!function {self.dotted}': {attr!r} is not defined there."
            ) from None

    def _refuse_foreign(self, local: Path) -> None:
        """A `!function` is the task's own code: a file beside the YAML. One naming any other
        module (`os.system`, `logging.config.dictConfig`) would let a data file run a library
        function on its values: refused unless the run passes --confirm-run-unsafe-code (a
        task file's `unsafe_code` cannot consent for the user), and then said before it is
        imported."""
        from assay.tasks.runtime_guard import foreign_functions_allowed

        if foreign_functions_allowed():
            print(
                f"assay: {self.yaml_file}: '!function {self.dotted}' names a function of an "
                "installed or standard-library module, not of the task's own files: "
                "--confirm-run-unsafe-code lets it run, in this process and NOT in the "
                "sandbox, on the task's values (its data rows included).",
                file=sys.stderr,
            )
            return
        raise TaskConfigError(
            f"{self.yaml_file}: '!function {self.dotted}': no file "
            f"{local.relative_to(self.yaml_dir)} next to the YAML; a !function names a function "
            "of the task's own Python files (beside its YAML), not of an installed or "
            "standard-library module, which would run on the task's values. Put the function "
            "in a file beside the YAML; if you trust the task, pass --confirm-run-unsafe-code "
            "(declaring `unsafe_code: true` in the YAML is not enough: a task file cannot "
            "consent for you)."
        )


def _import_failure(module: Path, dotted: str, exc: BaseException) -> str:
    """Why a task module did not import, with the fix when it needs lm-eval's own package."""
    missing = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
    if missing and missing.split(".")[0] == "lm_eval":
        return (
            f"{module}: importing it for '!function {dotted}' failed: it imports {missing!r} "
            "(lm-eval's own helpers), which is not installed. Install it with "
            "pip install 'assay[lm-eval-tasks]'."
        )
    if isinstance(exc, SystemExit):
        return f"{module}: importing it for '!function {dotted}' exited: {exc}"
    return f"{module}: importing it for '!function {dotted}' failed: {type(exc).__name__}: {exc}"


def _refuse_unnamed_code(dotted: str, module: str, local: Path) -> None:
    """Task code runs only from folders named on the command line (or installed packages).

    Python puts the current directory on sys.path, so without this a YAML naming
    `!function utils.fn` with no utils.py beside it would run whatever utils.py sits in the
    directory assay was started from.
    """
    top = module.split(".")[0]
    if top in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return  # the import below reports it
    origin = getattr(spec, "origin", None) or next(
        iter(getattr(spec, "submodule_search_locations", None) or []), None
    )
    if origin is None:
        return
    found = Path(origin).resolve()
    installed = "site-packages" in found.parts or "dist-packages" in found.parts
    if not installed and found.is_relative_to(Path.cwd().resolve()):
        raise TaskConfigError(
            f"{local.parent}: '!function {dotted}': no file {local.name} next to the YAML, and "
            f"the module of that name is {found}, in the current directory, which was not "
            "named on the command line; move it next to the YAML (or install it as a package)."
        )


def refuse_code_outside(raw: dict[str, Any], yaml_file: Path, roots: Sequence[Path]) -> None:
    """Task code runs only from paths named on the command line (`roots`).

    A `!function` module is looked up beside the YAML that names it, and through `include` that
    YAML may sit outside every named folder: such a module is refused before it is imported,
    and so is a `!function` of such a YAML that names no file beside it (an installed or
    standard-library function, `logging.config.dictConfig`), whatever the run's flags. A
    YAML inside the named folders may name one only with --confirm-run-unsafe-code
    (`FunctionRef.resolve`).
    """
    allowed = [root.resolve() for root in roots]
    for key, ref in _function_refs(raw):
        module = ref.module_file()
        named = any(ref.yaml_file.resolve().is_relative_to(r) for r in allowed)
        if not named and not module.is_file():
            raise TaskConfigError(
                f"{yaml_file}: {key}: '!function {ref.dotted}' (from {ref.yaml_file}) names a "
                f"function of no file beside that YAML (no {module.relative_to(ref.yaml_dir)} "
                "there), and that YAML lies "
                "outside the folders named on the command line: a task file from elsewhere may "
                "name only its own Python files (beside its YAML), never an installed or "
                "standard-library function, with or without --confirm-run-unsafe-code or "
                "`unsafe_code: true`. If you trust it, name its folder: --include-path "
                f"{ref.yaml_dir}."
            )
        if module.is_file() and not any(module.resolve().is_relative_to(r) for r in allowed):
            raise TaskConfigError(
                f"{yaml_file}: '!function {ref.dotted}' (from {ref.yaml_file}) would run "
                f"{module}, which is outside the folders named on the command line. Task code "
                f"runs only from those: if you trust it, add --include-path {ref.yaml_dir}."
            )


def consent_to_task_code(raw: dict[str, Any], yaml_file: Path, consent: bool) -> bool:
    """Decide from its YAML alone, before its Python files are imported (their top level is
    task code too), whether a task that declares unsafe_code may import them: without
    --confirm-run-unsafe-code (`consent`) it is refused; with it, the run says so first.
    Returns whether a notice was printed."""
    if not raw.get("unsafe_code"):
        return False
    own = sorted(
        {str(r.module_file()) for _, r in _function_refs(raw) if r.module_file().is_file()}
    )
    if not own:
        return False  # nothing of its own to import: the run's check of the task decides
    from assay.tasks.code_routes import WHERE_CODE_RUNS

    where = f"task {raw.get('task')!r} ({yaml_file})"
    if consent:
        print(
            f"assay: {where} declares unsafe_code: its own Python ({', '.join(own)}) is "
            "imported now and runs in this process, NOT in the sandbox "
            "(--confirm-run-unsafe-code).",
            file=sys.stderr,
        )
        return True
    raise TaskConfigError(
        f"{where} declares unsafe_code: it executes model-written code, and its own Python "
        f"({', '.join(own)}) runs in this process. Nothing of it has run: assay read the YAML "
        "only and imported none of its Python. Re-run with --confirm-run-unsafe-code if you "
        f"accept that. {WHERE_CODE_RUNS}"
    )


def _function_refs(value: Any, key: str = "") -> Iterator[tuple[str, FunctionRef]]:
    """Every `!function` in a parsed YAML value, however deeply nested, with the field that
    holds it (`metric_list[0].metric`)."""
    if isinstance(value, FunctionRef):
        yield key, value
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from _function_refs(item, f"{key}.{name}" if key else str(name))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _function_refs(item, f"{key}[{index}]")


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The loader of task files: `!function x.y` becomes a FunctionRef to the file being read."""

    yaml_file: str


def _function(loader: _Loader, node: yaml.Node) -> FunctionRef:
    return FunctionRef(loader.construct_scalar(node), Path(loader.yaml_file))


_Loader.add_constructor("!function", _function)


MAX_EXPANDED_NODES = 1_000_000
"""The most YAML nodes a task file may stand for once its aliases are expanded: lm-eval's task
trees are thousands; a file of nested aliases ("billion laughs") stands for billions, which
every walk over the parsed value would visit."""

MAX_EXPANDED_CHARS = 16_000_000
"""The most characters of text a task file may stand for once its aliases are expanded: a few
aliases of one long string stand for gigabytes under the node bound, which hashing or writing
the task's config would spell out."""


def _check_expanded_size(root: yaml.Node, path: Path | str) -> None:
    """Refuse a document whose aliases expand past MAX_EXPANDED_NODES nodes or
    MAX_EXPANDED_CHARS characters of scalar text (counted once per node, memoised, so the count
    itself is cheap)."""
    sizes: dict[int, tuple[int, int]] = {}

    def size(node: yaml.Node, depth: int) -> tuple[int, int]:
        if id(node) in sizes:
            return sizes[id(node)]
        if depth > 1000:
            raise TaskConfigError(
                f"{path}: YAML nested more than 1000 levels deep; not a task file."
            )
        sizes[id(node)] = (1, 0)  # a node that contains itself counts once
        if isinstance(node, yaml.ScalarNode):
            total = (1, len(node.value))
        else:
            items = node.value
            if isinstance(node, yaml.MappingNode):
                items = [n for pair in node.value for n in pair]
            parts = [size(item, depth + 1) for item in items]
            total = (1 + sum(n for n, _ in parts), sum(c for _, c in parts))
        sizes[id(node)] = total
        return total

    nodes, chars = size(root, 0)
    if nodes > MAX_EXPANDED_NODES or chars > MAX_EXPANDED_CHARS:
        what = (
            f"{nodes:,} values, more than the {MAX_EXPANDED_NODES:,}"
            if nodes > MAX_EXPANDED_NODES
            else f"{chars:,} characters of text, more than the {MAX_EXPANDED_CHARS:,}"
        )
        raise TaskConfigError(
            f"{path}: its YAML aliases (*name) expand to {what} a task file may hold (nested "
            "aliases: a 'billion laughs' file); write the values out or use `include:`."
        )


def read_yaml(path: Path | str) -> dict[str, Any]:
    """Parse one YAML file (no include resolution)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise TaskConfigError(f"{path}: cannot read the task file: {exc.strerror}.") from None
    except UnicodeDecodeError as exc:
        raise TaskConfigError(
            f"{path}: not UTF-8 text (byte {exc.start}); save the task file as UTF-8."
        ) from None
    loader = _Loader(text)
    loader.yaml_file = str(path)
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_expanded_size(node, path)
        data = None if node is None else loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise TaskConfigError(f"{path}:{where}: YAML syntax error: {problem}.") from None
    finally:
        loader.dispose()
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise TaskConfigError(
            f"{path}: a task file must be a mapping of keys, got {type(data).__name__}."
        )
    return data


def load_with_includes(path: Path) -> dict[str, Any]:
    """The YAML at `path` merged over its `include`s (local keys win), as lm-eval does."""
    merged, _ = load_with_includes_memo(path, Memo())
    return merged


@dataclass
class Memo:
    """What one pass over a tree parses once: merged mappings, and the real path of folders."""

    merged: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = field(default_factory=dict)
    """Merged mapping by real path, with the files it was read from."""
    real_dirs: dict[str, str] = field(default_factory=dict)

    def real(self, path: str) -> str:
        """os.path.realpath(path), each folder resolved once (it is most of a cold index)."""
        folder, name = os.path.split(os.path.abspath(path))
        real_dir = self.real_dirs.get(folder)
        if real_dir is None:
            real_dir = self.real_dirs[folder] = os.path.realpath(folder)
        full = os.path.join(real_dir, name)
        return os.path.realpath(full) if os.path.islink(full) else full


def load_with_includes_memo(
    path: Path | str, memo: Memo, _stack: tuple[str, ...] = ()
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """`load_with_includes`, plus every file read (the YAML, then its includes, recursively).

    `memo` is shared by the calls of one pass over a tree, so an include used by thousands of
    YAMLs (lm-eval's `_default_template_yaml`) is parsed once. Callers must not mutate the
    mappings it returns.
    """
    real = memo.real(str(path))
    if real in _stack:
        chain = " -> ".join((*_stack, real))
        raise TaskConfigError(f"{real}: include cycle: {chain}. Remove one of the includes.")
    if real in memo.merged:
        return memo.merged[real]
    data = read_yaml(real)
    includes = data.pop("include", None)
    files: tuple[str, ...] = (real,)
    if includes is not None:
        merged: dict[str, Any] = {}
        for name in [includes] if isinstance(includes, str) else list(includes):
            if not isinstance(name, str):
                raise TaskConfigError(
                    f"{real}: 'include' entries must be file names, got {name!r}."
                )
            target = name if os.path.isabs(name) else os.path.join(os.path.dirname(real), name)
            if not os.path.isfile(target):
                raise TaskConfigError(
                    f"{real}: included file {name!r} not found (looked at {target})."
                )
            base, base_files = load_with_includes_memo(target, memo, (*_stack, real))
            merged.update({k: v for k, v in base.items() if k != "task_list"})
            files += base_files
        merged.update(data)
        data = merged
    memo.merged[real] = (data, files)
    return data, files
