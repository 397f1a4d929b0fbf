"""The run's global seeds, set as lm-eval sets them: Python's `random` and numpy's global
generator before any task loads (a task's own code, e.g. a `process_docs` that shuffles with
`random`, then draws what it draws under lm-eval), torch's once the model is built, before any
request runs.

A seed of None leaves that generator as it is, as in lm-eval. Few-shot selection and sampled
generation do not read these global generators: they get their own seeded generators (Task's
few-shot seed, GenerationPolicy's seed), so their draws never depend on what ran before.
"""

from __future__ import annotations

import random
import sys

from assay.seeds import Seeds


def seed_globals(seeds: Seeds) -> None:
    """Seed Python's `random` and numpy's global generator (before tasks load)."""
    if seeds.random is not None:
        random.seed(seeds.random)
    if seeds.numpy is not None:
        import numpy as np

        np.random.seed(seeds.numpy)


def seed_torch(seeds: Seeds) -> None:
    """Seed torch's global generator, when torch is loaded (call it once the model is built:
    backends that use torch have imported it then; importing it for backends that do not, such
    as replay, dummy and the API backends, would cost every such run seconds for a generator
    nothing in it reads)."""
    if seeds.torch is not None and "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seeds.torch)
