"""Every shell and Python example of README.md and docs/*.md runs as written, offline.

A page's ```bash and ```python blocks run in page order in a scratch folder that links the
repository's files (so `examples/...` and `src/...` resolve, and what a block writes stays in the
scratch folder), with the virtualenv's bin first on PATH and the hub libraries offline. Python
blocks in a row share one interpreter (an example, then the test template that uses it); a
Python block whose first line is `# name.py` is written to that file instead of run, for later
blocks to import. A block right after a `<!-- skip -->` line (it needs the hub, a GPU or a
key, said on the line before the marker) is only checked for syntax; the marker is an HTML
comment, so the docs site and GitHub render the block as any other.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RUN_LANGUAGES = {"bash", "python"}
# Fences that would slip past the runner: spell them bash or python.
REFUSED_LANGUAGES = {"sh", "shell", "console", "zsh", "py", "python3", "pycon"}
# What the scratch folder does not link: outputs a block may write, and git's files.
NOT_LINKED = {".git", "out", "runs", "site"}
BLOCK_TIMEOUT_S = 120
SKIP = "<!-- skip -->"
"""The line before a block that is checked, not run."""
FENCE = re.compile(
    r"^(?P<fence>```+)(?P<info>[^\n`]*)\n(?P<code>.*?)^(?P=fence)[ \t]*$", re.M | re.S
)


@dataclass(frozen=True)
class Example:
    """One fenced block of a page."""

    page: Path
    line: int
    """1-based line of the opening fence."""
    language: str
    info_words: int
    """Words on the opening fence (the language and anything after it)."""
    skip: bool
    code: str
    before: str
    """The last non-blank line before the fence (before the skip marker, if any): the
    reason a skipped block cannot run."""

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def examples(page: Path) -> list[Example]:
    """The fenced blocks of `page`, in order."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        words = match["info"].split()
        preceding = [line.strip() for line in text[: match.start()].splitlines() if line.strip()]
        skip = bool(preceding) and preceding[-1] == SKIP
        if skip:
            preceding.pop()
        found.append(
            Example(
                page=page,
                line=text.count("\n", 0, match.start()) + 1,
                language=words[0] if words else "",
                info_words=len(words),
                skip=skip,
                code=match["code"],
                before=preceding[-1] if preceding else "",
            )
        )
    return found


def runnable(page: Path) -> list[Example]:
    return [e for e in examples(page) if e.language in RUN_LANGUAGES and not e.skip]


def scratch_folder(tmp_path: Path) -> Path:
    """A folder linking every top-level entry of the repository but outputs and git."""
    work = tmp_path / "work"
    work.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in NOT_LINKED:
            (work / entry.name).symlink_to(entry)
    return work


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", NO_COLOR="1")
    return env


PYTHON_DRIVER = textwrap.dedent(
    """
    import json, os, sys
    blocks = json.loads(sys.stdin.read())
    namespace = {"__name__": "__main__", "__file__": os.path.abspath("docs_example.py")}
    for where, code in blocks:
        first = code.splitlines()[0] if code.strip() else ""
        if first.startswith("# ") and first.endswith(".py") and " " not in first[2:]:
            with open(first[2:], "w", encoding="utf-8") as f:
                f.write(code)
            continue
        print(f"--- {where}", flush=True)
        exec(compile(code, where, "exec"), namespace)
    """
)


def run_group(group: list[Example], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run one bash block, or consecutive Python blocks in one interpreter, in its own session:
    whatever it leaves in the background (a server) is stopped once it ends. Output goes to a
    file, not a pipe, which a background process would hold open."""
    if group[0].language == "bash":
        command = ["bash", "-e", "-o", "pipefail", "-c", group[0].code]
        stdin = ""
    else:
        command = [sys.executable, "-c", PYTHON_DRIVER]
        stdin = json.dumps([[e.where, e.code] for e in group])
    log = cwd.parent / f"block-{group[0].line}.log"
    with log.open("w+", encoding="utf-8") as output:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=environment(),
            stdin=subprocess.PIPE,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            process.communicate(stdin, timeout=BLOCK_TIMEOUT_S)
            timed_out = ""
        except subprocess.TimeoutExpired:
            timed_out = f"\n[timed out after {BLOCK_TIMEOUT_S} s]"
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    text = log.read_text(encoding="utf-8", errors="replace") + timed_out
    return subprocess.CompletedProcess(command, process.returncode, text)


def groups(blocks: list[Example]) -> list[list[Example]]:
    """Each bash block alone; consecutive Python blocks together."""
    grouped: list[list[Example]] = []
    for block in blocks:
        if block.language == "python" and grouped and grouped[-1][-1].language == "python":
            grouped[-1].append(block)
        else:
            grouped.append([block])
    return grouped


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if runnable(p)], ids=lambda p: p.name)
def test_the_page_s_examples_run_as_written(page, tmp_path):
    work = scratch_folder(tmp_path)
    for group in groups(runnable(page)):
        result = run_group(group, work)
        assert result.returncode == 0, (
            f"{group[0].where}: the example failed (exit {result.returncode}):\n"
            f"{result.stdout[-4000:]}"
        )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_skipped_examples_are_valid_syntax_with_a_reason(page):
    for example in examples(page):
        if not example.skip:
            continue
        assert example.language in RUN_LANGUAGES, (
            f"{example.where}: skip on a {example.language!r} block"
        )
        assert example.before and not example.before.startswith(("#", "```")), (
            f"{example.where}: say on the line before the block why it cannot run offline "
            "(it needs the hub, a GPU or a key)"
        )
        if example.language == "bash":
            check = subprocess.run(
                ["bash", "-n"], input=example.code, capture_output=True, text=True
            )
            assert check.returncode == 0, f"{example.where}: {check.stderr}"
        else:
            compile(example.code, example.where, "exec")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_shell_and_python_blocks_are_labelled_so_the_runner_sees_them(page):
    for example in examples(page):
        assert example.language not in REFUSED_LANGUAGES, (
            f"{example.where}: a ```{example.language} block is not run; label it "
            f"```bash or ```python (with {SKIP} and the reason before it when it cannot run)"
        )
        assert example.info_words <= 1, (
            f"{example.where}: the docs site does not render a fence with words after the "
            f"language; put {SKIP} on the line before the block instead"
        )


def test_the_parser_finds_blocks_skips_and_reasons(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "Intro.\n\n```bash\necho hi\n```\n\nNeeds the hub:\n\n<!-- skip -->\n```python\n"
        "import x\n```\n\n````text\n```bash\nnot a block\n```\n````\n",
        encoding="utf-8",
    )
    found = [(e.language, e.skip, e.before, e.line) for e in examples(page)]
    assert found == [
        ("bash", False, "Intro.", 3),
        ("python", True, "Needs the hub:", 10),
        ("text", False, "```", 14),
    ]
