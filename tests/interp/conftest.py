"""Fixtures for the interpreter tests: a fresh random generator per test (its seed is printed,
so a failure can be replayed with TL_TEST_SEED=<seed>)."""

import os

import numpy as np
import pytest


@pytest.fixture
def rng():
    seed = int(os.environ.get("TL_TEST_SEED", np.random.SeedSequence().entropy % 2**32))
    print(f"random seed: {seed} (replay with TL_TEST_SEED={seed})")
    return np.random.default_rng(seed)
