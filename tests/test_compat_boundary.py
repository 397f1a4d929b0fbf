"""Other harnesses live in `assay.compat.<peer>`: the core names them only in `assay.peers`'
registry entries (docs/architecture.md, "Layers"). A new mention of lighteval anywhere else in
src/assay fails here, so its compatibility cannot leak back into the core.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import assay
from assay import peers

ROOT = Path(assay.__file__).parent
PEER = "lighteval"

DATASET_ID = re.compile(r"[\w.-]+/[\w.-]*lighteval[\w.-]*|lighteval/[\w.-]+", re.IGNORECASE)
"""A Hub dataset id that carries the name (`lighteval/siqa`, `...MATH-lighteval`): data, not a
dependency on the harness."""

LEFT: dict[str, int] = {}
"""Mentions left outside compat/, by file: none now. This table only shrinks."""


def _mentions() -> dict[str, int]:
    """Per source file outside compat/ and the registry entries, its mentions of the peer."""
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name.startswith("compat/") or name == "peers.py":
            continue
        text = DATASET_ID.sub("", path.read_text(encoding="utf-8"))
        count = len(re.findall(PEER, text, re.IGNORECASE))
        if count:
            out[name] = count
    return out


def test_the_core_mentions_lighteval_only_where_it_did():
    assert _mentions() == LEFT


def test_the_registry_entries_name_compat_modules_that_import():
    entries: list[str] = []
    for name, value in vars(peers).items():
        if name.isupper():
            if isinstance(value, dict):
                value = tuple(value.values())
            entries += [value] if isinstance(value, str) else list(value)
    assert entries, "assay.peers declares no entries"
    for module in entries:
        assert module.startswith("assay.compat."), module
        importlib.import_module(module)


def test_the_registry_entries_are_the_only_lines_of_peers_naming_a_peer():
    lines = (ROOT / "peers.py").read_text(encoding="utf-8").splitlines()
    named = [line for line in lines if PEER in line]
    assert named and all('"assay.compat.' in line for line in named)


def test_a_dataset_id_is_not_a_mention_but_the_harness_is():
    assert DATASET_ID.sub("", 'hf_repo="lighteval/siqa"') == 'hf_repo=""'
    assert DATASET_ID.sub("", "DigitalLearningGmbH/MATH-lighteval") == ""
    assert re.findall(PEER, DATASET_ID.sub("", "lighteval's PromptManager"))
