"""Requests: what a model is asked for each doc (loglikelihood, rolling, generation)."""

# Modules, imported by name (from assay.requests import <module>).
__all__ = ["doc_result", "instances", "types"]
