"""Every module of the package imports, the imports between them form no cycle, and none
points up the layers (docs/architecture.md, "Layers").

The graph counts every `import` of an assay module, at the top of a file or inside a function
(a lazy import still ties the two modules together), but not those under `if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import assay

ROOT = Path(assay.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_import_module(func: ast.expr) -> bool:
    """`importlib.import_module` or a bare `import_module`."""
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id == "import_module"
    )


def _named_modules(arg: ast.expr) -> set[str]:
    """The assay modules an `import_module` argument names: a literal name, or every module under
    the literal prefix of an f-string (`f"assay.catalog.{name}"`). A name computed otherwise (a
    lazy export table's value) is not followed."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return {arg.value}
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        prefix = str(arg.values[0].value)
        return {m for m in MODULES if m.startswith(prefix) and m != prefix.rstrip(".")}
    return set()


def _imported(name: str, path: Path) -> set[str]:
    """The assay modules that module `name` imports."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in MODULES else base)
        elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args:
            found.update(_named_modules(node.args[0]))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in found if m in MODULES and m != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def test_every_module_imports():
    failed = {}
    for name in MODULES:
        if name.endswith("__main__"):
            continue  # running it is the command line
        try:
            importlib.import_module(name)
        except Exception as exc:  # reported below, module by module
            failed[name] = f"{type(exc).__name__}: {exc}"
    assert failed == {}


def test_the_import_graph_has_no_cycles():
    graph = {name: _imported(name, path) for name, path in MODULES.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_lazy_import_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "shared types and util",
        (
            "assay",  # the package's lazy exports name their modules as strings
            "assay.doc",
            "assay.errors",
            "assay.registry",
            "assay.peers",  # names compat modules as strings only: registrations, not imports
            "assay.util",
            "assay.images",
            "assay.hub",
            "assay.backend_names",
            "assay.seeds",
            "assay.data",
        ),
    ),
    (
        "stages below the model",
        (
            "assay.stats",
            "assay.prompts",
            "assay.requests",
            "assay.filters",
            "assay.sandbox",
            "assay.agents",
        ),
    ),
    ("models", ("assay.models",)),
    ("execution", ("assay.execution",)),
    # Metrics sit below tasks: a task config asks the metric registry what its metrics declare
    # (the output type they prefer, whether a judge grades them).
    ("metrics", ("assay.metrics",)),
    ("tasks", ("assay.tasks",)),
    # The built-in task families: each picks its metrics' functions (IFEval's checks, math
    # answer matching, perplexity's word and byte counts), so they sit above metrics and tasks.
    ("task catalog", ("assay.catalog",)),
    # Every task a run can name: the catalog (imported by module name), plugins, YAML folders
    # and custom files, so it sits above the catalog.
    ("task registry", ("assay.tasks.registry",)),
    # Other harnesses' formats and names, adapted to the core: they serve the core's hooks,
    # named by `assay.peers`' registry entries (strings, loaded on first use), and import it.
    ("compatibility", ("assay.compat",)),
    ("results", ("assay.results",)),
    ("run", ("assay.run",)),
    ("pipelines and test helpers", ("assay.pipelines", "assay.testing")),
    ("cli", ("assay.cli", "assay.__main__")),
]
"""The package's layers, lowest first: a module imports only from its own layer or below.
A module takes the layer of the longest name that covers it."""


def _layer(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (length of the matching name, layer)
    for index, (_, names) in enumerate(LAYERS):
        for name in names:
            covers = module == name or module.startswith(name + ".")
            if covers and (best is None or len(name) > best[0]):
                best = (len(name), index)
    return None if best is None else best[1]


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """Each import from a lower layer to a higher one, as "module (layer) -> module (layer)"."""
    out = []
    for module, imported in sorted(graph.items()):
        for target in sorted(imported):
            low, high = _layer(module), _layer(target)
            if low is not None and high is not None and high > low:
                out.append(f"{module} ({LAYERS[low][0]}) -> {target} ({LAYERS[high][0]})")
    return out


def test_every_module_has_a_layer():
    assert [name for name in MODULES if _layer(name) is None] == []


def test_no_import_points_up_the_layers():
    graph = {name: _imported(name, path) for name, path in MODULES.items()}
    assert _upward(graph) == []


def test_the_layer_check_finds_a_lazy_upward_import(tmp_path):
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def f():\n    from assay.run import settings\n", encoding="utf-8")
    graph = {"assay.results.lazy": _imported("assay.results.lazy", lazy)}
    assert graph["assay.results.lazy"] == {"assay.run.settings"}
    assert _upward(graph) == ["assay.results.lazy (results) -> assay.run.settings (run)"]
    typed = tmp_path / "typed.py"
    typed.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from assay.run import settings\n",
        encoding="utf-8",
    )
    assert _imported("assay.results.typed", typed) == set()
    assert (
        _layer("assay.metrics")
        < _layer("assay.catalog.gsm8k")
        < _layer("assay.tasks.registry.python_tasks")
        < _layer("assay.compat.lighteval.metrics")
    )
    loads = tmp_path / "loads.py"
    loads.write_text(
        "import importlib\n"
        "def f(name):\n"
        "    importlib.import_module('assay.run.settings')\n"
        "    importlib.import_module(f'assay.catalog.{name}')\n",
        encoding="utf-8",
    )
    loaded = _imported("assay.tasks.loads", loads)
    assert "assay.run.settings" in loaded
    assert "assay.catalog.gsm8k" in loaded
    assert "assay.tasks.loads (tasks) -> assay.run.settings (run)" in _upward(
        {"assay.tasks.loads": loaded}
    )


def test_the_architecture_page_lists_the_layers_in_order():
    page = (ROOT.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if line.startswith("| ") and "`" in line]
    named = [row.split("|")[1].strip() for row in rows if row.split("|")[1].strip() in dict(LAYERS)]
    assert named == [name for name, _ in LAYERS if name in named]
    assert set(named) == {name for name, _ in LAYERS}
