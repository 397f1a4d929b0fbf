"""The public surface: what `import assay` offers, what type checkers see, and the package
layout rules (every package says what it exports)."""

from __future__ import annotations

import ast
from importlib import import_module
from pathlib import Path

import pytest

import assay

SRC = Path(assay.__file__).parent


def test_every_exported_name_resolves_and_all_is_the_export_table():
    assert assay.__all__ == [*sorted(assay._EXPORTS), "__version__"]
    for name, module in assay._EXPORTS.items():
        assert getattr(assay, name) is getattr(import_module(module), name)


def test_type_checkers_see_exactly_the_lazy_exports():
    tree = ast.parse((SRC / "__init__.py").read_text())
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"
    )
    seen = {
        alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert seen == assay._EXPORTS


def test_knob_types_are_not_top_level_names_and_the_error_says_where_they_are():
    with pytest.raises(AttributeError, match=r"from assay.pipelines import List"):
        assay.List  # noqa: B018
    from assay.pipelines import List, Range  # RapidFire's names, where RapidFire users find them

    assert List([1, 2]).values == [1, 2] and Range(0, 1) is not None


def test_the_two_prompt_managers_have_distinct_names():
    import assay.pipelines as pipelines
    from assay.pipelines.rag.fewshot_prompts import FewShotPromptManager

    assert "FewShotPromptManager" in pipelines.__all__ and "PromptManager" not in pipelines.__all__
    assert pipelines.RFPromptManager is FewShotPromptManager  # RapidFire's name
    assert assay.PromptManager.__module__ == "assay.prompts.manager"


def test_every_package_declares_all_and_the_package_is_typed():
    packages = [p.parent for p in SRC.rglob("__init__.py") if "data" not in p.parts]
    folders = {SRC} | {
        d for d in SRC.rglob("*") if d.is_dir() and any(d.glob("*.py")) and "data" not in d.parts
    }
    assert folders == set(packages)  # no folder of modules without an __init__.py
    for package in packages:
        tree = ast.parse((package / "__init__.py").read_text())
        names = {
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign | ast.AnnAssign)
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Name)
        }
        assert "__all__" in names, package
    assert (SRC / "py.typed").exists()
