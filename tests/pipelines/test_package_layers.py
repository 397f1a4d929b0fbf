"""assay.pipelines' sub-packages import only downwards: configs < rag < shards < experiment."""

from __future__ import annotations

import ast
from pathlib import Path

import assay.pipelines

ORDER = ("configs", "rag", "shards", "experiment")
"""Lowest first: what an experiment runs, the RAG parts of a config, running shards, the
Experiment (docs/architecture.md: where each kind of change goes)."""
ROOT = Path(assay.pipelines.__file__).parent


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, at the top or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[:2] != ["assay", "pipelines"] or len(parts) < 3 or parts[2] not in ORDER:
        return None
    return ORDER.index(parts[2])


def test_sub_packages_import_only_their_own_layer_or_lower() -> None:
    upward = []
    for package in ORDER:
        files = sorted((ROOT / package).glob("*.py"))
        assert files, package
        for path in files:
            for module in imported_modules(path):
                target = layer(module)
                if target is not None and target > ORDER.index(package):
                    upward.append(f"{package}/{path.name} -> {module}")
    assert upward == []


def test_every_module_is_in_a_sub_package_or_named_here() -> None:
    # A new flat module should find its sub-package instead.
    flat = sorted(p.name for p in ROOT.glob("*.py"))
    assert flat == ["__init__.py", "row_metrics.py"]
    assert sorted(p.name for p in ROOT.iterdir() if p.is_dir() and p.name != "__pycache__") == (
        sorted(ORDER)
    )
