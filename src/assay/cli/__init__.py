"""The `assay` command line: one module per command, assembled in `main`."""

from assay.cli.main import main

__all__ = ["main"]
