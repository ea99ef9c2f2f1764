"""The elements a thread gets per step of a parallel loop that layout inference lays out by
default (engine/context.py, `_vector_width`): 16 bytes of the narrowest element the loop
moves through global or shared memory, but at most 16 bytes of the widest element it stores
into shared memory, so that a converting copy into a wider shared tile stores each warp's
values contiguously (H200, 2026-11-27: mHC pre's big fuse kernel 23.7 -> 20.6 us, its bank
conflicts were 13x the reference's)."""

import pytest

from tilelang.engine.context import _vector_width
from tilelang.ir import nodes as ir


def _copy_loop(src_dtype, src_scope, dst_dtype, dst_scope):
    i = ir.Var("i")
    src = ir.Buffer("src", (1024,), ir.DType(src_dtype), src_scope)
    dst = ir.Buffer("dst", (1024,), ir.DType(dst_dtype), dst_scope)
    value = ir.Load(src, (i,), src.dtype)
    if src_dtype != dst_dtype:
        value = ir.Cast(value, dst.dtype)
    return ir.Store(dst, (i,), value)


@pytest.mark.parametrize("src,src_scope,dst,dst_scope,width", [
    ("bfloat16", "global", "float32", "shared.dyn", 4),   # 16 bytes of the float32 tile
    ("float16", "global", "float16", "shared.dyn", 8),
    ("float32", "global", "bfloat16", "shared.dyn", 8),   # 16 bytes of the stored bfloat16
    ("int8", "global", "float32", "shared.dyn", 4),
    ("float32", "shared.dyn", "bfloat16", "global", 8),   # loads from shared: not capped
    ("bfloat16", "global", "float32", "local.fragment", 8),  # registers: not capped
])
def test_width(src, src_scope, dst, dst_scope, width):
    assert _vector_width((64, 1024), _copy_loop(src, src_scope, dst, dst_scope), 128) == width
