"""Neutral helpers any layer of assay may use (secret redaction, ...); they import nothing from assay."""
