"""Every source module over 500 lines is split, or says in its docstring why it is one job.

The marker is the phrase `Over 500 lines and still one job:` followed by the reason, in the
module's docstring (docs/architecture.md, "Module size").
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "assay"
LIMIT = 500
MARKER = "Over 500 lines and still one job:"
MIN_REASON = 20
"""Characters the reason after the marker needs at least: a sentence, not a token."""


def oversized(root: Path) -> dict[str, int]:
    """The modules under `root` over LIMIT lines whose docstring gives no reason after MARKER:
    their paths relative to `root`, with their line counts."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines <= LIMIT:
            continue
        docstring = ast.get_docstring(ast.parse(text)) or ""
        _, marked, reason = docstring.partition(MARKER)
        if not marked or len(reason.split("\n\n")[0].strip()) < MIN_REASON:
            found[path.relative_to(root).as_posix()] = lines
    return found


def test_no_source_module_over_500_lines_without_saying_why_it_is_one_job():
    unexplained = oversized(SRC)
    assert not unexplained, (
        f"split these modules, or add '{MARKER} <why>' to their docstring: {unexplained}"
    )


@pytest.mark.parametrize(
    ("docstring", "flagged"),
    [
        ("Does a thing.", True),
        (
            f"Does a thing.\n\n{MARKER} the parsing and the checks share one walk of the tree.",
            False,
        ),
        (f"Does a thing.\n\n{MARKER} yes.", True),  # a marker without a reason
        (f"Does a thing.\n\n{MARKER}\n\nNext paragraph about something else entirely.", True),
    ],
)
def test_the_check_flags_a_long_module_unless_its_docstring_says_why(tmp_path, docstring, flagged):
    long = tmp_path / "long.py"
    long.write_text(f'"""{docstring}"""\n' + "x = 1\n" * LIMIT, encoding="utf-8")
    (tmp_path / "short.py").write_text("x = 1\n" * LIMIT, encoding="utf-8")
    assert list(oversized(tmp_path)) == (["long.py"] if flagged else [])
