"""64-bit index arithmetic for tensors whose element offsets do not fit in int32.

Expects: thread IR (after partitioning, before bounds guards). Guarantees: every access to a
global buffer of 2^31 or more elements (static shape), or whose shape uses 64-bit sizes, has
indices computed in int64 from their leaves up (variables and constants are widened before
any multiplication), so neither the address nor the bounds guard derived from it overflows
(SEMANTICS §10: index dtype follows the extents).
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import Mutator

INT64 = ir.DType("int64")


def needs_int64(b: ir.Buffer) -> bool:
    if b.scope != "global":
        return False
    n = 1
    for d in b.shape:
        if not isinstance(d, int):
            return any(isinstance(x, ir.Expr) and x.dtype.bits == 64 for x in b.shape)
        n *= d
    return n >= 2**31


class _Widen(Mutator):
    """Rebuild an integer expression in int64."""

    def visit_Var(self, v):
        return ir.Cast(v, INT64) if v.dtype.is_int and v.dtype.bits < 64 else v

    def visit_Const(self, c):
        return ir.const(c.value, INT64) if c.dtype.is_int and c.dtype.bits < 64 else c

    def visit_Binary(self, e):
        if not e.dtype.is_int:
            return e
        return ir.binary(e.op, self.visit(e.a), self.visit(e.b))

    def visit_Select(self, e):
        if not e.dtype.is_int:
            return e
        return ir.select(e.cond, self.visit(e.true_value), self.visit(e.false_value))

    def visit_Load(self, e):  # an index loaded from memory is a leaf
        return ir.cast_to(e, INT64) if e.dtype.is_int else e

    def visit_Call(self, e):
        return ir.cast_to(e, INT64) if e.dtype.is_int else e

    def visit_Cast(self, e):
        return ir.cast_to(e, INT64) if e.dtype.is_int else e


class _Indices(Mutator):
    def __init__(self, all_global=False):
        self.all_global = all_global

    def _wide(self, b):
        return needs_int64(b) or (self.all_global and b.scope == "global")

    def visit_Load(self, e):
        e = self.generic(e)
        if self._wide(e.buffer):
            return ir.Load(e.buffer, tuple(_Widen().visit(i) for i in e.indices), e.dtype)
        return e

    def visit_Store(self, s):
        s = self.generic(s)
        if self._wide(s.buffer):
            return ir.Store(s.buffer, tuple(_Widen().visit(i) for i in s.indices), s.value,
                            loc=s.loc)
        return s


def widen_indices(kernel: ir.Kernel, ctx) -> ir.Kernel:
    from .pass_config import PassConfigKey

    bits = ctx.configs.get(PassConfigKey.TL_CONFIG_INDEX_BITWIDTH.value)
    return _Indices(all_global=bits is not None and int(bits) == 64).visit(kernel)
