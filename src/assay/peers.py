"""Where the core finds other harnesses' compatibility packages (`assay.compat.<peer>`).

The core offers hooks (metric names, task sources, prompt layouts, few-shot selections,
standard errors); a compatibility package serves them, and this table is the one place the
core names such a package: each entry is a module, imported by name the first time its hook is
asked, so `assay --help` never imports a peer and a peer's own package stays optional. The
modules named here sit above the core (`compat`, docs/architecture.md): these are
registrations, not imports, and `tests/test_compat_boundary.py` checks every one.
"""

from __future__ import annotations

import importlib
from types import ModuleType

METRIC_NAMES: tuple[str, ...] = ("assay.compat.lighteval.names",)
"""Modules serving other harnesses' metric names, each with `knows(name) -> bool` and
`translate(name, kwargs) -> (assay name, kwargs) | None` (a ConfigError for a name it refuses)."""
PROMPT_LAYOUTS: dict[str, str] = {"lighteval": "assay.compat.lighteval.prompts"}
"""Other harnesses' prompt layouts by name (`TaskConfig.prompt_layout`), each module a
`prompts.manager.PeerLayout`."""
FEWSHOT_SELECTORS: dict[str, str] = {"lighteval": "assay.compat.lighteval.fewshot"}
"""Other harnesses' few-shot selections by prefix (`few_shots_select="<prefix>:<name>"`), each
module a `tasks.fewshot.PeerSelection`."""

TASK_SOURCE: str = "assay.compat.lighteval.source"
"""The module that reads task strings (their grammar is a peer's) and serves that peer's tasks
and --custom-tasks configs (`tasks.registry.task_source.TaskSource`)."""


def load(modules: tuple[str, ...]) -> list[ModuleType]:
    """The modules of one hook's entries, imported on first use."""
    return [importlib.import_module(module) for module in modules]
