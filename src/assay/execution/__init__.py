"""Execution: batching, the response cache and executors (local process, torchrun ranks, ray)."""
