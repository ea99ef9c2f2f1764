"""Benchmarking and correctness helpers for compiled kernels."""

from .supply import TensorSupplyType  # noqa: F401
