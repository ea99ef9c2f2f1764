"""Packed x2 arithmetic (`T.add2`, `T.sub2`, `T.mul2`, `T.fma2`, `T.max2`, `T.min2`,
`T.abs2`) as packed instructions.

Each op's value is a two-lane vector (`PackedPair`: its lanes, computed lane by lane, plus the
op and its operands). Stored with a `T.Ramp(i, 1, 2)` index into a global tensor, when every
operand is two adjacent elements of a global tensor loaded with such a Ramp, the store is one
packed statement

    tl::store_packed2<__half2>(&C[i], tl::add2(tl::load_packed2<__half2>(&A[i]), ...))

(float2, __half2 or __nv_bfloat162: tl/packed_x2.cuh), provided every pair is aligned to its
two elements (an even element offset). Any other use goes lane by lane, with the same values
(max2 / min2 as fmax / fmin: the other lane where one is NaN). The interpreter runs the packed
statement as its two lanes (interp/packed_x2.py).
"""

from __future__ import annotations

from ..arith import Analyzer
from ..frontend.builder import current_builder, emit
from ..ir import nodes as ir
from ..ir.dtype import DType

PACKED_TYPES = {"float32": "float2", "float16": "__half2", "bfloat16": "__nv_bfloat162"}
LOAD = "tl::load_packed2<"
STORE = "tl::store_packed2<"
OPS = ("add2", "sub2", "mul2", "fma2", "max2", "min2", "abs2")


def lane_value(op, *lanes):
    """The value of one lane of `op` (the meaning the packed instruction has)."""
    if op == "add2":
        return lanes[0] + lanes[1]
    if op == "sub2":
        return lanes[0] - lanes[1]
    if op == "mul2":
        return lanes[0] * lanes[1]
    if op == "fma2":
        return lanes[0] * lanes[1] + lanes[2]
    if op == "max2":
        return ir.binary("max", lanes[0], lanes[1])
    if op == "min2":
        return ir.binary("min", lanes[0], lanes[1])
    return ir.Call("abs", (lanes[0],), lanes[0].dtype)


def _kernel_analyzer():
    """An analyzer knowing the ranges of the kernel's thread and block indices."""
    analyzer = Analyzer()
    b = current_builder(required=False)
    if b is not None and b.in_kernel():
        k = b.kernel.data["kernel"]
        for var, extent in zip(k.thread_vars, k.threads):
            analyzer.bind(var, 0, extent)
        for var, extent in zip(k.block_vars, k.grid):
            analyzer.bind(var, 0, extent)
    return analyzer


def _unwrapped(index, analyzer):
    """A Ramp lane's index without the count-from-the-end wrap (indexing.wrap_negative) where
    it provably is not negative."""
    if isinstance(index, ir.Select) and analyzer.prove(ir.compare("ge", index.false_value, 0)):
        return index.false_value
    return index


def _pair_start(lanes):
    """The first of two Loads (`lanes`) of adjacent elements of a global tensor (lane 1 is
    lane 0's last index + 1, at an even element offset), or None."""
    if len(lanes) != 2 or not all(isinstance(x, ir.Load) for x in lanes):
        return None
    analyzer = _kernel_analyzer()
    a, b = (ir.Load(x.buffer, tuple(_unwrapped(i, analyzer) for i in x.indices), x.dtype)
            for x in lanes)
    buf = a.buffer
    if b.buffer is not buf or buf.scope != "global" or buf.dtype.name not in PACKED_TYPES:
        return None
    if any(not ir.structural_equal(x, y) for x, y in zip(a.indices[:-1], b.indices[:-1])):
        return None
    if not analyzer.prove(ir.compare("eq", ir.binary("sub", b.indices[-1], a.indices[-1]), 1)):
        return None
    strides = buf.effective_strides()
    if not (isinstance(strides[-1], int) and strides[-1] == 1):
        return None
    for i, st in zip(a.indices, strides):
        even = analyzer.is_divisible(ir.as_expr(i), 2) or (isinstance(st, int) and st % 2 == 0)
        if not even:
            return None
    return a


def _packed_expr(value, dtype, ctype):
    """`value` as a packed expression over pairs of global elements, or None."""
    from .vectors import PackedPair

    if isinstance(value, PackedPair):
        args = [_packed_expr(v, dtype, ctype) for v in value.operands]
        if any(a is None for a in args):
            return None
        return ir.Call("call_extern", (f"tl::{value.op}",) + tuple(args), DType("handle"))
    start = _pair_start(tuple(getattr(value, "lanes", ())))
    if start is None or start.buffer.dtype is not dtype:
        return None
    return ir.Call("call_extern", (f"{LOAD}{ctype}>", ir.address_of(start.buffer, start.indices)),
                   DType("handle"))


def store_packed(buffer, lane_indices, value) -> bool:
    """Emit `buffer[lanes] = value` as one packed store if it can be (see the module
    docstring); False: store it lane by lane."""
    dtype = buffer.dtype
    ctype = PACKED_TYPES.get(dtype.name)
    if ctype is None or len(lane_indices) != 2:
        return False
    b = current_builder(required=False)
    if b is None or any(f.kind == "for" and f.data.get("loop_kind") == "parallel"
                        for f in b.frames):
        return False  # a T.Parallel body is partitioned element by element
    target = _pair_start(tuple(ir.Load(buffer, tuple(ir.as_expr(i) for i in idx), dtype)
                               for idx in lane_indices))
    if target is None:
        return False
    expr = _packed_expr(value, dtype, ctype)
    if expr is None:
        return False
    emit(ir.Evaluate, ir.Call("call_extern", (f"{STORE}{ctype}>",
                                              ir.address_of(buffer, target.indices), expr),
                              DType("void")))
    return True
