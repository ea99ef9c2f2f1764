"""Tensors at addresses computed in the kernel (`T.make_tensor(table[i], shape, dtype)`): the
interpreter reads and writes the memory at that address directly, as the GPU does.

The address is a host address (the interpreter runs on CPU tensors, so a table built from
`t.data_ptr()` holds host addresses). It must be the same in every thread of the block, non-
zero and aligned to the element size; the declared shape must lie within the tensor it points
into (as on the GPU, where a wrong shape is an illegal access: nothing can check it here
either). Element types the interpreter stores widened (bfloat16, float8) cannot alias torch's
memory and are refused.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from .lanes import fail

__all__ = ["array_at_address"]

_WIDENED = ("bfloat16", "float8_e4m3", "float8_e5m2", "float8_e8m0fnu")


def array_at_address(ctx, buf, address: int, shape: tuple) -> np.ndarray:
    """A numpy array over the memory at `address`, of `buf`'s dtype and `shape` (row-major)."""
    if buf.dtype.name in _WIDENED:
        raise fail(ctx, NotImplementedError,
                   f"T.make_tensor of {buf.dtype} at a computed address is not supported by "
                   "the CPU interpreter (it stores that type widened, so it cannot alias the "
                   "tensor's memory); it runs on the GPU")
    npdt = buf.dtype.numpy
    if address <= 0 or address % npdt.itemsize:
        raise fail(ctx, ValueError, f"T.make_tensor: {address:#x} is not the address of "
                                    f"{buf.dtype} elements (null or misaligned)")
    nbytes = math.prod(shape) * npdt.itemsize
    raw = (ctypes.c_byte * nbytes).from_address(address)
    return np.frombuffer(raw, dtype=npdt).reshape(shape)
