"""Holm–Bonferroni against statsmodels."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from assay.stats.multiplicity import holm


@pytest.mark.parametrize("seed", range(5))
def test_holm_matches_statsmodels(seed):
    p = np.random.default_rng(seed).uniform(0, 0.2, 9)
    expected = multipletests(p, method="holm")[1]
    assert holm(p.tolist()) == pytest.approx(expected.tolist(), rel=1e-12)


def test_missing_p_values_pass_through_and_do_not_count():
    expected = multipletests([0.01, 0.04], method="holm")[1]
    assert holm([0.01, None, 0.04]) == [
        pytest.approx(expected[0]),
        None,
        pytest.approx(expected[1]),
    ]
