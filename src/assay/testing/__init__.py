"""Helpers for trying assay without a model or a key.

`assay.testing.serve` is a local OpenAI-compatible stub server with canned answers: run it with
`python -m assay.testing.serve`, or in-process with `assay.testing.serve.StubServer`. Nothing is
imported here, so that `python -m assay.testing.serve` runs the module once.
"""

__all__: list[str] = []
