"""Metadata of 2:4 structured sparsity (the reference's contract between its sparse
compressor and mma.sp): how many elements a group keeps, and how many elements one metadata
word indexes.

A group of `group` consecutive elements keeps `kept` of them; each kept element's position in
its group takes 2 bits of metadata (4 bits per pair). float32 operands use 1:2 groups."""

from __future__ import annotations

from ...ir.dtype import DType

__all__ = ["GROUP_CONFIG", "get_e_factor", "get_e_replicate_factor"]

GROUP_CONFIG = {DType(name): cfg for name, cfg in (
    ("float32", (1, 2)), ("float16", (2, 4)), ("bfloat16", (2, 4)), ("int8", (2, 4)),
    ("uint8", (2, 4)), ("float8_e4m3", (2, 4)), ("float8_e5m2", (2, 4)))}

_BITS_PER_GROUP = 4


def get_e_factor(a_dtype, meta_dtype) -> int:
    """Elements of `a_dtype` (dense) that one `meta_dtype` metadata word describes."""
    _, group = GROUP_CONFIG[DType(a_dtype)]
    return (DType(meta_dtype).bits // _BITS_PER_GROUP) * group


def get_e_replicate_factor(a_dtype) -> int:
    """Consecutive threads that share one metadata value (1 for 8-bit operands, else 2)."""
    return 1 if DType(a_dtype).bits <= 8 else 2
