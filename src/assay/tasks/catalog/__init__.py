"""Built-in benchmarks, one module per family; each defines TASKS_TABLE (and optionally GROUPS)."""
