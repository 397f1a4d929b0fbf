"""Built-in tasks render the requests and scores lm-eval 0.4.13 renders, on frozen rows."""

from __future__ import annotations

import pytest
from _parity import check_run, data_files, load


@pytest.mark.parametrize("name", data_files())
def test_matches_lm_eval(name, tmp_path):
    spec = load(name)
    for i, run in enumerate(spec["runs"]):
        check_run(spec, run, tmp_path / str(i))
