"""A small part of the reference's `tilelang.carver` (its tile-configuration recommender is not
provided): `tilelang.carver.arch.driver` answers device queries (SM count, shared memory, ...)
that reference examples use to size persistent kernels and search spaces."""

from . import arch  # noqa: F401
