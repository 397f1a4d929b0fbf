"""`assay compare`'s flags: --cluster-by forms, --baseline among the runs or beside them."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.cli.compare import cluster_by_option
from assay.cli.main import main
from assay.errors import ConfigError

RUNS = Path(__file__).resolve().parents[1] / "data" / "lm_eval_runs"


def testcluster_by_option_applies_to_every_task_or_one():
    assert cluster_by_option(["passage_id", "fxc_yesno=label"]) == {
        "*": "passage_id",
        "fxc_yesno": "label",
    }
    for bad in ("=x", "task=", ""):
        with pytest.raises(ConfigError, match="--cluster-by"):
            cluster_by_option([bad])


def test_baseline_outside_the_runs_is_compared_first(capsys):
    code = main(
        ["compare", str(RUNS / "dummy_seed1"), "--baseline", str(RUNS / "dummy_seed2"),
         "--cluster-by", "fxc_yesno=label", "--bootstrap-iters", "50"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "dummy_seed2 -> dummy_seed1" in out
    yesno = [line for line in out.splitlines() if "fxc_yesno" in line and " acc " in line]
    # Clustered by the 0/1 label: two clusters.
    assert yesno and yesno[0].split()[-2:] == ["2", "paired-clustered"]


def test_confidence_must_be_a_level(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "a", "b", "--confidence", "95"])
    assert "must be between 0 and 1" in capsys.readouterr().err
