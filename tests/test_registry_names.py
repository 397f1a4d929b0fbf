"""Every built-in name a registry declares lazily is registered by the module it names.

The lazy tables (in `metrics/base.py`, `filters/base.py`, `models/base.py`) let `assay --help`
and name listings run without importing heavy modules; a name whose module does not register it
would only fail when a user first asks for it. The reverse holds too: a name a built-in module
registers under a registry's decorator is declared in that registry's table, so listings show it.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from assay.filters.base import FILTERS
from assay.metrics.base import AGGREGATIONS, METRICS
from assay.models.base import MODELS

REGISTRIES = {"metric": METRICS, "aggregation": AGGREGATIONS, "filter": FILTERS, "model": MODELS}


@pytest.mark.parametrize("kind", sorted(REGISTRIES))
def test_each_lazy_name_is_registered_by_its_module(kind: str) -> None:
    registry = REGISTRIES[kind]
    declared = dict(registry._lazy)
    missing = []
    for name, module in sorted(declared.items()):
        importlib.import_module(module)
        if name not in registry._entries:
            missing.append(f"{name} (declared in {module})")
    assert not missing, f"{kind} names declared lazily but not registered: {missing}"


_UNDECLARED = """
import importlib, json, sys
from assay.filters.base import FILTERS
from assay.metrics.base import AGGREGATIONS, METRICS
from assay.models.base import MODELS
registries = {"metric": METRICS, "aggregation": AGGREGATIONS, "filter": FILTERS, "model": MODELS}
declared = {kind: set(r._lazy) | set(r._entries) for kind, r in registries.items()}
for r in registries.values():
    for module in sorted(set(r._lazy.values())):
        importlib.import_module(module)
out = {}
for kind, r in registries.items():
    builtin = {
        name for name, obj in r._entries.items()
        if getattr(obj, "__module__", "").startswith("assay.")
    }
    out[kind] = sorted(builtin - declared[kind])
json.dump(out, sys.stdout)
"""


def test_each_name_a_builtin_module_registers_is_declared() -> None:
    # A fresh interpreter: in this one, other tests may have imported the modules already.
    done = subprocess.run(
        [sys.executable, "-c", _UNDECLARED], capture_output=True, text=True, check=True
    )
    undeclared = {kind: names for kind, names in json.loads(done.stdout).items() if names}
    assert not undeclared, f"names registered by built-in modules but not declared: {undeclared}"
