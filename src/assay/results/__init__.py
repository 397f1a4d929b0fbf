"""Results: results.json, samples files and tables in lm-eval layout."""

# Modules, imported by name (from assay.results import <module>).
__all__ = [
    "compare",
    "compare_table",
    "readers",
    "schema",
    "summary",
    "table",
    "task_config",
    "writer",
]
