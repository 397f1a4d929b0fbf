"""The docs site renders every page whole: each heading and code block of a page's markdown is
in the page mkdocs builds, and placeholders such as `mmlu_<subject>` render as text."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
FENCE = re.compile(r"^(?P<fence>```+)[^\n`]*\n(?P<code>.*?)^(?P=fence)[ \t]*$", re.M | re.S)
HEADING = re.compile(r"^(#{1,6})[ \t]+(?P<text>.+?)[ \t]*#*[ \t]*$", re.M)
PLACEHOLDER = re.compile(r"<[a-z][a-z_ ]*>")
INLINE_CODE = re.compile(r"(`+)(?P<code>.+?)\1")


class Rendered(HTMLParser):
    """The headings, code blocks and visible text of a built page's article."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.headings: list[str] = []
        self.code: list[str] = []
        self.text: list[str] = []
        self._heading: list[str] | None = None
        self._code: list[str] | None = None
        self._anchor = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if re.fullmatch(r"h[1-6]", tag):
            self._heading = []
        elif tag == "code" and self._code is None:
            self._code = []
        elif tag == "a" and ("class", "headerlink") in attrs:
            self._anchor += 1

    def handle_endtag(self, tag: str) -> None:
        if re.fullmatch(r"h[1-6]", tag) and self._heading is not None:
            self.headings.append(" ".join("".join(self._heading).split()))
            self._heading = None
        elif tag == "code" and self._code is not None:
            self.code.append("".join(self._code))
            self._code = None
        elif tag == "a" and self._anchor:
            self._anchor -= 1

    def handle_data(self, data: str) -> None:
        if self._anchor:
            return  # the permalink mark
        if self._heading is not None:
            self._heading.append(data)
        if self._code is not None:
            self._code.append(data)
        self.text.append(data)


def markdown_parts(text: str) -> tuple[list[str], list[str], list[str]]:
    """A page's headings (as text), fenced code blocks and placeholders outside code."""
    blocks = [m["code"] for m in FENCE.finditer(text)]
    prose = FENCE.sub("", text)
    headings = []
    for match in HEADING.finditer(prose):
        heading = INLINE_CODE.sub(lambda m: m["code"], match["text"])
        heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links keep their text
        headings.append(" ".join(heading.replace("*", "").split()))
    placeholders = PLACEHOLDER.findall(re.sub(r"<!--.*?-->", "", prose, flags=re.S))
    return headings, blocks, placeholders


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    if mkdocs is None:
        pytest.skip("mkdocs is not installed (the docs extra)")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--quiet", "-d", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def built_page(site: Path, page: Path) -> Path:
    return site / "index.html" if page.stem == "index" else site / page.stem / "index.html"


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_every_heading_code_block_and_placeholder_of_the_page_renders(site, page):
    headings, blocks, placeholders = markdown_parts(page.read_text(encoding="utf-8"))
    rendered = Rendered()
    rendered.feed(built_page(site, page).read_text(encoding="utf-8"))
    for heading in headings:
        assert heading in rendered.headings, f"{page.name}: heading {heading!r} not rendered"
    code = [html.unescape(c).strip() for c in rendered.code]
    for block in blocks:
        assert block.strip() in code, (
            f"{page.name}: code block not rendered as one: {block.strip()[:200]!r}"
        )
    text = "".join(rendered.text)
    for placeholder in placeholders:
        assert placeholder in text, f"{page.name}: {placeholder} does not render (escape it)"


def test_the_page_parser_reads_headings_blocks_and_placeholders():
    text = (
        "# Title `x`\n\nSee mmlu_<subject> and `a_<b>`.\n\n<!-- skip -->\n"
        "```bash\n# not a heading\necho <x>\n```\n\n## [Link](y.md) **bold**\n"
    )
    assert markdown_parts(text) == (
        ["Title x", "Link bold"],
        ["# not a heading\necho <x>\n"],
        ["<subject>", "<b>"],
    )
