"""The run's global seeds: Python's random, numpy's and torch's global generators, as lm-eval
seeds them (random.seed, np.random.seed, torch.manual_seed); None leaves one untouched."""

from __future__ import annotations

import random

import numpy as np

from assay.execution.seeding import seed_globals, seed_torch
from assay.seeds import Seeds


def test_python_and_numpy_are_seeded_and_none_leaves_a_generator_alone():
    seed_globals(Seeds(5, 6, None, None))
    assert random.random() == random.Random(5).random()
    assert np.random.rand() == np.random.RandomState(6).rand()
    np.random.seed(11)
    seed_globals(Seeds(None, None, None, None))  # nothing reseeded: the stream goes on
    assert np.random.rand() == np.random.RandomState(11).rand()


def test_torch_is_seeded_once_loaded():
    import torch

    seed_torch(Seeds(torch=9))
    assert torch.equal(torch.rand(3), torch.rand(3, generator=torch.Generator().manual_seed(9)))
