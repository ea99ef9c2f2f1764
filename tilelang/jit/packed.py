"""Tensor arguments that hold packed sub-byte elements (`T.float4_e2m1fn`).

torch has no 4-bit element type: a tensor of float4_e2m1fn values is passed as a tensor of
one-byte elements (int8, uint8 or torch.float4_e2m1fn_x2), two values to a byte, the value of
even logical index in the low nibble. As the reference's argument binder does, the logical
sizes of such a parameter are derived from the byte tensor's:

* shape: the last dimension times the pack factor (8 / element bits), the others unchanged;
* strides: every stride but the last times the pack factor (the last, in bytes 1, stays 1:
  consecutive values of a row are packed together).

Everything that reads an argument's sizes for a parameter (specialisation keys, annotation
checks, symbol binding) goes through `logical_shape` / `logical_strides`, so a sub-byte
parameter binds and checks its symbols in element units, like every other parameter.
"""

from __future__ import annotations

from ..ir.dtype import DType


def pack_factor(dtype: DType) -> int:
    """Elements per byte of storage: 2 for float4_e2m1fn, 1 for types of a byte or more."""
    bits = dtype.bits * dtype.lanes
    return 8 // bits if 0 < bits < 8 else 1


def holds_packed(torch_dtype, dtype: DType) -> bool:
    """Whether a tensor of `torch_dtype` can carry packed `dtype` elements: any one-byte
    element type does (the reference checks only that the total bits match)."""
    itemsize = getattr(torch_dtype, "itemsize", None)
    return pack_factor(dtype) > 1 and itemsize == 1


def logical_shape(shape, dtype: DType) -> tuple:
    """The element shape of a parameter of `dtype` whose byte tensor has `shape`."""
    shape = tuple(int(s) for s in shape)
    k = pack_factor(dtype)
    if k == 1 or not shape:
        return shape
    return shape[:-1] + (shape[-1] * k,)


def logical_strides(strides, dtype: DType) -> tuple:
    """The element strides of a parameter of `dtype` whose byte tensor has `strides`."""
    strides = tuple(int(s) for s in strides)
    k = pack_factor(dtype)
    if k == 1 or not strides:
        return strides
    return tuple(s * k for s in strides[:-1]) + strides[-1:]
