"""Built-in benchmarks, one module per family; each defines TASKS_TABLE (and optionally GROUPS)."""

# The registry finds the families by listing this folder; nothing is re-exported here.
__all__: list[str] = []
