"""The printed results table in lm-eval's markdown layout."""

from __future__ import annotations

from assay.results.table import make_table

RESULTS = {
    "results": {
        "mytask": {
            "alias": "mytask",
            "acc,none": 0.5,
            "acc_stderr,none": 0.1234567,
            "acc_norm,none": 0.25,
            "acc_norm_stderr,none": "N/A",
        }
    },
    "versions": {"mytask": 2.0},
    "n-shot": {"mytask": 5},
    "higher_is_better": {"mytask": {"acc": True, "acc_norm": True}},
}


def cells(line):
    assert line.startswith("|") and line.endswith("|")
    return [c.strip() for c in line[1:-1].split("|")]


def test_table_columns_rows_and_alignment():
    lines = make_table(RESULTS).splitlines()
    assert cells(lines[0]) == [
        "Tasks", "Version", "Filter", "n-shot", "Metric", "", "Value", "", "Stderr",
    ]  # fmt: skip
    # Numeric columns are right-aligned (markdown "---:").
    assert [c.endswith(":") for c in cells(lines[1])] == [
        False, True, False, True, False, False, True, False, True,
    ]  # fmt: skip
    assert cells(lines[2]) == ["mytask", "2", "none", "5", "acc", "↑", "0.5000", "±", "0.1235"]
    assert cells(lines[3]) == ["", "", "none", "5", "acc_norm", "↑", "0.2500", "±", "N/A"]
    assert len({len(line) for line in lines}) == 1


def test_empty_section_is_empty():
    assert make_table(RESULTS, "groups") == ""
