"""The run's header in results.json: what produced it (settings, seeds, versions, backend)."""

from __future__ import annotations

from assay.results.provenance import library_versions, plain
from assay.results.schema import BackendIdentity, Provenance, TaskProvenance
from assay.run.settings import RECORDED, RunSettings, names_changing
from assay.seeds import SEED_KEYS


def run_provenance(
    backend: BackendIdentity, settings: RunSettings, tasks: dict[str, TaskProvenance]
) -> Provenance:
    """The run's provenance block (`backend` from `results.provenance.backend_identity`)."""
    return {
        "versions": library_versions(),
        "backend": backend,
        "settings": {name: plain(getattr(settings, name)) for name in names_changing(*RECORDED)},
        "seeds": dict(zip(SEED_KEYS, settings.seed, strict=True)),
        "tasks": dict(tasks),
    }
