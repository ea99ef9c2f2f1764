"""Helpers shared by the interpreter tests."""

import numpy as np
import torch

import tilelang


def cpu(func, out_idx=None):
    """Compile a prim_func for the CPU interpreter."""
    return tilelang.compile(func, out_idx=out_idx, target="cpu")


def run(func, *args):
    """Compile for the CPU and run with every parameter given (results written in place)."""
    kernel = cpu(func)
    kernel(*args)
    return kernel


def tensor(rng, shape, dtype, lo=-4, hi=4):
    """Random torch tensor: normal floats, uniform ints in [lo, hi)."""
    dt = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    if dt.is_floating_point:
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(dt)
    return torch.from_numpy(rng.integers(lo, hi, size=shape).astype(np.int64)).to(dt)


def poisoned(shape, dtype):
    """An output tensor filled with garbage, so untouched elements show."""
    dt = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    if dt.is_floating_point:
        return torch.full(shape, float("nan"), dtype=dt)
    return torch.full(shape, -77, dtype=dt)


def f64(t):
    return t.detach().to(torch.float64).numpy()
