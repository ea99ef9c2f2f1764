"""Which float32 register fragments hold only values TF32 represents exactly.

A float32 `T.gemm` computes in TF32 and rounds each float32 operand to it (`cvt.rna`, one
compare and one add per register, every time the operand is read). A fragment filled by
converting bfloat16 (or float16, float8, a small integer) to float32 already holds TF32
numbers, so the gemm may give its registers to the tensor cores as they are: the same result
without the rounding (mHC pre's gemm, bfloat16 converted into a `T.tfloat32` fragment: 128
registers rounded per k-step for nothing).

The fact is about every value the fragment can hold: each store into it stores an exact value
(a cast from a narrow type, an exact constant, a load of another such fragment, a choice
between exact values), and the fragment is named nowhere else but as a load's source or a
gemm's A / B operand (a call that takes its address, a copy, a reduction or a gemm's
accumulator could write anything into it).
"""

from __future__ import annotations

import numpy as np

from ...ir import nodes as ir
from ...ir.visitor import children

FLOAT32 = "float32"

# Types whose every value a float32 holds with at most TF32's 10 mantissa bits: float16 (10),
# bfloat16 (7), the float8 / float6 / float4 formats; integers of at most 11 bits.
_EXACT_SOURCES = frozenset({
    "float16", "bfloat16", "float8_e4m3", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
    "float8_e4m3b11fnuz", "float8_e3m4", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn",
    "float4_e2m1fn", "float4_e2m1_unpacked", "int8", "uint8", "int4", "uint4", "bool",
})


def _exact_constant(value) -> bool:
    try:
        bits = np.asarray(value, dtype=np.float32).view(np.uint32)
    except (TypeError, ValueError, OverflowError):
        return False
    return int(bits) & 0x1FFF == 0 or not np.isfinite(np.float32(value))


def _exact(e, exact_buffers) -> bool:
    if isinstance(e, ir.Const):
        return _exact_constant(e.value)
    if isinstance(e, ir.Cast):
        return e.value.dtype.name in _EXACT_SOURCES or (
            e.value.dtype.name == FLOAT32 and _exact(e.value, exact_buffers))
    if isinstance(e, ir.Load):
        return e.buffer in exact_buffers
    if isinstance(e, ir.Select):
        return _exact(e.true_value, exact_buffers) and _exact(e.false_value, exact_buffers)
    if isinstance(e, ir.Call) and e.op == "if_then_else":
        return _exact(e.args[1], exact_buffers) and _exact(e.args[2], exact_buffers)
    return False


class _Uses:
    """The stored values of every fragment, and the fragments named in other ways."""

    def __init__(self):
        self.stores: dict = {}
        self.other_use: set = set()

    def walk(self, node, addressed=False):
        if isinstance(node, ir.Buffer):  # named as itself: a call's argument, a view
            self.other_use.add(node)
            if node.view_of is not None:
                self.other_use.add(node.view_of)
            return
        if isinstance(node, ir.Store):
            self.stores.setdefault(node.buffer, []).append(node.value)
            self.walk(node.indices)
            self.walk(node.value)
            return
        if isinstance(node, ir.Load):
            if addressed:
                self.other_use.add(node.buffer)
            self.walk(node.indices)
            return
        if isinstance(node, ir.Allocate):
            self.walk(node.init)
            self.walk(node.body)
            return
        if isinstance(node, ir.Gemm):  # A and B are read; C is written by the gemm
            for operand in (node.A, node.B):
                self.walk(operand.region)
            extra = getattr(node, "E", None)
            for region in (node.C,) + ((extra,) if extra is not None else ()):
                self.walk(region)
            return
        if isinstance(node, ir.Call) and node.op == "address_of":
            for a in node.args:
                self.walk(a, addressed=True)
            return
        if isinstance(node, ir.BufferRegion):  # a copy's, reduction's or gemm's C region
            self.other_use.add(node.buffer)
            self.walk(node.region)
            return
        for child in children(node):
            self.walk(child, addressed)


def tf32_exact_fragments(body) -> frozenset:
    """The float32 `local.fragment` buffers of `body` whose every value is a TF32 number (see
    the module docstring): the largest such set, found by removing fragments a store of an
    inexact value disqualifies until none does."""
    uses = _Uses()
    uses.walk(body)
    exact = {b for b in uses.stores
             if b.scope == "local.fragment" and b.dtype.name == FLOAT32
             and b.view_of is None and b not in uses.other_use}
    changed = True
    while changed:
        changed = False
        for b in list(exact):
            if not all(_exact(v, exact) for v in uses.stores[b]):
                exact.discard(b)
                changed = True
    return frozenset(exact)
