"""Execution: batching, the response cache and executors (local process, torchrun ranks, ray)."""

# Modules, imported by name (from assay.execution import <module>).
__all__ = ["batching", "cache", "distributed", "executor", "local", "ray"]
