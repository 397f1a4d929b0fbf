"""Execution: the executors (local process, torchrun ranks, ray) that send a plan's requests to
a model through the response cache (`assay.requests.cache`), in batches
(`assay.requests.batching`)."""

# Modules, imported by name (from assay.execution import <module>).
__all__ = ["distributed", "executor", "local", "ray"]
