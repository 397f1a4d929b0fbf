"""Odd task names and full disks: safe file names, terminal-safe output, clear messages."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from toy_tasks import MC_TASK, output_files, write_data

from assay.cli.main import main
from assay.requests.cache import ResponseCache

ESCAPES = "\x1b[31mred\x1b]8;;https://evil.example/\x07link\x1b]8;;\x07\u202e"


def write_named_task(folder: Path, file: str, name: str) -> None:
    """A multiple-choice task called `name` (YAML-quoted, escapes and all) in `file`."""
    write_data(folder, n_test=6, n_train=2)
    (folder / file).write_text(MC_TASK.format(name=json.dumps(name), data=folder), encoding="utf-8")


def run(folder: Path, task: str, out: Path, *flags: str) -> int:
    args = ["run", "--model", "dummy", "--tasks", task, "--include-path", str(folder)]
    return main([*args, "--output-dir", str(out), "--no-progress", "--log-samples", *flags])


def test_a_task_name_with_a_slash_logs_its_samples_under_a_safe_file_name(tmp_path, capsys):
    write_named_task(tmp_path / "tasks", "t.yaml", "family/sub")
    assert run(tmp_path / "tasks", "family/sub", tmp_path / "out") == 0
    assert list(output_files(tmp_path / "out")) == ["samples_family__sub.jsonl"]
    assert not list((tmp_path / "out").glob(".samples_*"))


def test_escapes_in_task_names_are_printed_as_visible_text(tmp_path, capsys):
    name = f"esc{ESCAPES}"
    write_named_task(tmp_path / "tasks", "t.yaml", name)
    assert run(tmp_path / "tasks", name, tmp_path / "a") == 0
    assert run(tmp_path / "tasks", name, tmp_path / "b", "--seed", "3") == 0
    printed = capsys.readouterr().out
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    printed += capsys.readouterr().out
    assert "esc\\x1b[31mred\\x1b]8;;https://evil.example/\\x07link" in printed
    assert "\x1b" not in printed and "\x07" not in printed and "\u202e" not in printed
    # The file name holds no control characters either.
    assert all("\x1b" not in p.name for p in (tmp_path / "a").iterdir())


def test_errors_naming_a_task_print_its_escapes_as_text(tmp_path, capsys):
    (tmp_path / "tasks").mkdir()
    assert run(tmp_path / "tasks", f"ghost{ESCAPES}", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert "ghost\\x1b[31mred" in err and "\x1b" not in err


# ---------------------------------------------------------------- full disks
def test_a_full_disk_under_the_response_cache_is_a_message(tmp_path, capsys, monkeypatch):
    """sqlite's own "database or disk is full", made real by capping the file's pages."""
    write_named_task(tmp_path / "tasks", "t.yaml", "toy")
    opened = ResponseCache.__init__

    def capped(self, *args, **kwargs):
        opened(self, *args, **kwargs)
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        self._db.execute(f"PRAGMA max_page_count = {pages}")

    monkeypatch.setattr(ResponseCache, "__init__", capped)
    code = run(tmp_path / "tasks", "toy", tmp_path / "out")
    err = capsys.readouterr().err
    assert code == 2
    assert "no space left on the disk while writing the response cache" in err
    assert str(tmp_path / "out" / "cache.sqlite") in err
    assert "Traceback" not in err and not (tmp_path / "out" / "results.json").exists()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_a_full_disk_under_the_samples_file_is_a_message(tmp_path, capsys):
    """Writes to /dev/full fail with ENOSPC, as on a full disk."""
    write_named_task(tmp_path / "tasks", "t.yaml", "toy")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".samples_toy.0.part").symlink_to("/dev/full")
    code = run(tmp_path / "tasks", "toy", out)
    err = capsys.readouterr().err
    assert code == 2
    assert "no space left on the disk" in err and "Traceback" not in err


def test_a_full_disk_under_results_json_is_a_message(tmp_path, capsys, monkeypatch):
    import assay.results.writer as writer

    def full(path, chunks):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    write_named_task(tmp_path / "tasks", "t.yaml", "toy")
    monkeypatch.setattr(writer, "_atomic_write", full)
    code = run(tmp_path / "tasks", "toy", tmp_path / "out")
    err = capsys.readouterr().err
    assert code == 2
    assert f"while writing {tmp_path / 'out' / 'results.json'}" in err
    assert "Traceback" not in err


def test_terminal_safe_keeps_line_breaks_and_shows_every_other_control_character():
    import logging

    from assay.util.terminal import TerminalSafeFormatter, terminal_safe

    assert terminal_safe("a\tb\nc") == "a\tb\nc"
    assert terminal_safe("\x1b[2J\x07\x9b\u202eé") == "\\x1b[2J\\x07\\x9b\\u202eé"
    record = logging.LogRecord("assay", logging.WARNING, "", 0, "task %s", ("x\x1b]0;t\x07",), None)
    assert TerminalSafeFormatter("%(message)s").format(record) == "task x\\x1b]0;t\\x07"
