"""Executors: where requests run (local process; ray for many workers)."""
