"""docs/extending.md: every example and test template on the page runs, section by section."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

PAGE = Path(__file__).parents[1] / "docs" / "extending.md"
SECTIONS = ["A metric", "A filter", "A model backend", "A task family"]


def python_blocks(section: str) -> list[str]:
    """The ```python blocks under the `## section` heading, in order."""
    text = PAGE.read_text(encoding="utf-8")
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", body, flags=re.S)


@pytest.fixture
def clean_registries():
    """Names the examples register are removed afterwards, so other tests never see them."""
    from assay.filters.base import FILTERS
    from assay.metrics.base import METRICS
    from assay.models.base import MODELS

    yield
    METRICS._entries.pop("length_ratio", None)
    FILTERS._entries.pop("last_number", None)
    MODELS._entries.pop("echo", None)


@pytest.mark.parametrize("section", SECTIONS)
def test_the_example_and_its_test_template_run(section, tmp_path, clean_registries):
    blocks = python_blocks(section)
    assert len(blocks) == 2, f"{section}: an example and a test template"
    namespace = {"__name__": f"extending_{section.split()[-1]}", "__file__": str(tmp_path / "t.py")}
    for block in blocks:
        first = block.splitlines()[0]
        if first.startswith("# ") and first.endswith(".py"):
            (tmp_path / first[2:]).write_text(block, encoding="utf-8")  # a file the test names
        else:
            exec(compile(block, f"{PAGE.name}: {section}", "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_")]
    assert tests, f"{section}: the test template defines no test"
    for test in tests:
        wanted = inspect.signature(test).parameters
        test(**({"tmp_path": tmp_path} if "tmp_path" in wanted else {}))


def test_the_page_has_no_section_the_runner_misses():
    headings = re.findall(r"^## (.+)$", PAGE.read_text(encoding="utf-8"), flags=re.M)
    assert headings == SECTIONS
