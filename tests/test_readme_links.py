"""The README's relative links lead to files of the repository (mkdocs checks docs/ itself)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_readme_links_resolve():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    targets = [t for t in LINK.findall(text) if "://" not in t and not t.startswith("#")]
    assert targets, "the README links its guides"
    missing = [t for t in targets if not (REPO / t.split("#", 1)[0]).exists()]
    assert missing == []


def test_readme_stays_a_front_door():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move detail into docs/"
