"""The printed results table, cell for cell as lm-eval 0.4.13 prints it.

The expected tables were printed once by lm-eval's own make_table on RESULTS.
"""

from __future__ import annotations

from assay.results.table import UNMEASURED_NOTE, make_table, results_tables

RESULTS = {
    "results": {
        "zeta": {"alias": "zeta", "acc,none": 0.5, "acc_stderr,none": 0.1234567,
                 "acc_norm,none": 0.25, "acc_norm_stderr,none": "N/A"},
        "mmlu_b": {"alias": "b-alias", "word_perplexity,none": 12.345678, "bits_per_byte,none": 0.9,
                   "bits_per_byte_stderr,none": 0.01, "exact_match,strict-match": 1,
                   "exact_match_stderr,strict-match": 0.0},
        "mmlu_a": {"alias": "mmlu_a", "name": "mmlu_a", "sample_len": 3, "acc,none": 1.0, "acc_stderr,none": 0.0},
        "mmlu": {"alias": "mmlu", "acc,none": 0.75, "acc_stderr,none": 0.05},
    },
    "groups": {"mmlu": {"alias": "mmlu", "acc,none": 0.75, "acc_stderr,none": 0.05}},
    "group_subtasks": {"mmlu": ["mmlu_b", "mmlu_a"], "zeta": []},
    "versions": {"zeta": 2.0, "mmlu_a": 1, "mmlu_b": "Yaml", "mmlu": 2.5},
    "n-shot": {"zeta": 5, "mmlu_a": 0},
    "higher_is_better": {"zeta": {"acc": True, "acc_norm": True},
                         "mmlu_b": {"word_perplexity": False, "bits_per_byte": False, "exact_match": True},
                         "mmlu": {"acc": True}},
}  # fmt: skip

LM_EVAL_RESULTS_TABLE = "|  Tasks   |Version|   Filter   |n-shot|    Metric     |   | Value |   |Stderr|\n|----------|-------|------------|-----:|---------------|---|------:|---|------|\n|mmlu      |    2.5|none        |      |acc            |↑  | 0.7500|±  |0.0500|\n| - mmlu_a |      1|none        |     0|acc            |   | 1.0000|±  |     0|\n| - b-alias|Yaml   |none        |      |bits_per_byte  |↓  | 0.9000|±  |0.0100|\n|          |       |strict-match|      |exact_match    |↑  | 1.0000|±  |     0|\n|          |       |none        |      |word_perplexity|↓  |12.3457|   |      |\n|zeta      |      2|none        |     5|acc            |↑  | 0.5000|±  |0.1235|\n|          |       |none        |     5|acc_norm       |↑  | 0.2500|±  |   N/A|\n"

LM_EVAL_GROUPS_TABLE = "|Groups|Version|Filter|n-shot|Metric|   |Value|   |Stderr|\n|------|------:|------|------|------|---|----:|---|-----:|\n|mmlu  |    2.5|none  |      |acc   |↑  | 0.75|±  |  0.05|\n"

# Ours differs from lm-eval's only where the stderr is 0 (no spread measured): `n/a†`, not `± 0`.
RESULTS_TABLE = LM_EVAL_RESULTS_TABLE.replace("|±  |     0|", "|±  |n/a†  |")


def test_results_table_is_lm_evals_but_for_unmeasured_spreads():
    # Groups first with their subtasks indented (alphabetically), metrics alphabetically,
    # N/A stderr, no arrow without a direction, numbers right-aligned.
    assert RESULTS_TABLE.count("n/a†") == 2
    assert make_table(RESULTS) == RESULTS_TABLE


def test_table_without_zero_stderr_is_byte_identical_to_lm_evals():
    measured = {**RESULTS, "results": {k: v for k, v in RESULTS["results"].items() if k == "zeta"}}
    table = make_table(measured)
    assert "n/a†" not in table and "0.1235" in table
    assert UNMEASURED_NOTE not in results_tables({**measured, "groups": {}})


def test_groups_table_is_lm_evals():
    assert make_table(RESULTS, "groups") == LM_EVAL_GROUPS_TABLE


def test_printed_tables_are_the_two_tables_one_blank_line_apart():
    printed = results_tables(RESULTS)
    tables = RESULTS_TABLE.rstrip("\n") + "\n\n" + LM_EVAL_GROUPS_TABLE.rstrip("\n")
    assert printed == tables + "\n" + UNMEASURED_NOTE
    assert results_tables({**RESULTS, "groups": {}}) == (
        RESULTS_TABLE.rstrip("\n") + "\n" + UNMEASURED_NOTE
    )
