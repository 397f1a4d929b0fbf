"""Requests: what a model is asked for each doc (loglikelihood, rolling, generation), their
batch shapes, and the response cache that keeps their answers."""

# Modules, imported by name (from assay.requests import <module>).
__all__ = ["batching", "cache", "doc_result", "instances", "types"]
