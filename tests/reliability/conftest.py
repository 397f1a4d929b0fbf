"""Fixtures of the reliability tests (helpers live in toy_tasks.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from toy_tasks import write_data, write_task


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    """A folder with data and three tasks: toy_mc, toy_mc_b (multiple choice, other data) and
    toy_gen."""
    folder = tmp_path / "tasks"
    write_data(folder)
    write_data(folder / "b", prefix="b-")
    write_task(folder, "toy_mc", "mc")
    write_task(folder, "toy_mc_b", "mc", data=folder / "b")
    write_task(folder, "toy_gen", "gen")
    return folder
