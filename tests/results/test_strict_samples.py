"""samples_*.jsonl is strict JSON: a value that is not a finite number is written as null with a
`non_finite_values` note, as results.json does, and read back as the number it was."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from assay.cli.main import main
from assay.results.readers import read_run
from assay.results.samples import dumps, record_line


def _strict(text: str) -> dict:
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))


def test_a_record_without_non_finite_values_is_written_as_lm_eval_writes_it():
    record = {"doc_id": 0, "doc": {"q": "é", "n": np.int64(3)}, "acc": 1.0, "ppl": 2.5}
    assert record_line(record) == dumps(record)


def test_non_finite_values_become_null_with_a_note_naming_each():
    record = {"doc_id": 0, "doc": {"x": np.float32("nan"), "y": [1, -math.inf]}, "ppl": math.inf}
    line = _strict(record_line(record))
    assert line["ppl"] is None and line["doc"] == {"x": None, "y": [1, None]}
    assert line["non_finite_values"] == {"ppl": "inf", "doc/x": "nan", "doc/y/1": "-inf"}


def _run(folder, values):
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({"results": {"qa": {"name": "qa"}}}))
    with (folder / "samples_qa.jsonl").open("w") as handle:
        for i, v in enumerate(values):
            record = {"doc_id": i, "doc_hash": f"h{i}", "filter": "none", "metrics": ["acc_norm"]}
            handle.write(record_line({**record, "acc_norm": v}) + "\n")
    return folder


def test_compare_reads_the_noted_values_back(tmp_path):
    a = _run(tmp_path / "a", [1.0, 2.0, 3.0, 4.0, 5.0])
    b = _run(tmp_path / "b", [1.5, 2.0, math.inf, 4.5, 5.0])
    assert "Infinity" not in (b / "samples_qa.jsonl").read_text()
    [record] = [r for r in read_run(b).samples("qa").by_filter["none"].values() if r["doc_id"] == 2]
    assert record["acc_norm"] == math.inf and "non_finite_values" not in record
    out = tmp_path / "c.json"
    assert main(["compare", str(a), str(b), "--json", str(out)]) == 0
    [row] = _strict(out.read_text())["comparisons"]
    assert "1 of the 5 docs hold a value that is not a finite number (inf)" in row["note"]
