"""layout/index.py helpers on numpy arrays."""

import numpy as np
import pytest

from tilelang.layout.index import distinct


@pytest.mark.parametrize("n", [0, 1, 2, 7, 300])
def test_distinct_is_sorted_unique(n):
    rng = np.random.default_rng(n)
    values = rng.integers(-40, 40, size=n)
    got = distinct(values)
    assert got.tolist() == sorted(set(values.tolist()))


def test_distinct_flattens_and_keeps_dtype():
    a = np.array([[5, 1], [5, 3]], dtype=np.int64)
    got = distinct(a)
    assert got.dtype == np.int64 and got.tolist() == [1, 3, 5]
