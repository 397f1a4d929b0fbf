"""Neutral helpers any layer of assay may use (secret redaction, ...); they import nothing from assay."""

# Modules, imported by name (from assay.util import <module>).
__all__ = ["redact"]
