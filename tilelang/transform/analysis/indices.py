"""Index arithmetic the thread-level passes share: int64 offsets for huge tensors, the
flat element offset of an access, and how an index moves across the lanes of a vector."""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.visitor import Mutator, substitute
from ..pass_config import PassConfigKey

INT64 = ir.DType("int64")


def needs_int64(b: ir.Buffer) -> bool:
    """Whether element offsets into `b` may not fit in int32 (a global buffer of 2^31 or more
    elements, or one whose shape uses 64-bit sizes)."""
    if b.scope != "global":
        return False
    n = 1
    for d in b.shape:
        if not isinstance(d, int):
            return any(isinstance(x, ir.Expr) and x.dtype.bits == 64 for x in b.shape)
        n *= d
    return n >= 2**31


class Widen(Mutator):
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


def wide_indices(gbuf, ctx) -> bool:
    """Whether accesses to `gbuf` compute their offsets in int64 (needs_int64, or the pass
    config tl.config_index_bitwidth = 64)."""
    bits = ctx.configs.get(PassConfigKey.TL_CONFIG_INDEX_BITWIDTH.value)
    return needs_int64(gbuf) or (bits is not None and int(bits) == 64)


def flat_offset(ctx, buf, indices):
    """The element offset of `buf[indices]`: by strides for a global buffer, by its layout
    for a shared one (None for a buffer without a layout)."""
    if buf.scope == "global":
        total = ir.const(0)
        for i, s in zip(indices, buf.effective_strides()):
            total = ir.binary("add", total, ir.binary("mul", i, s))
        return total
    layout = ctx.layouts.get(buf)
    if layout is None:
        return None
    return ir.as_expr(layout.forward(*indices))


def lane_steps(expr, vi, vec: int, analyzer) -> list:
    """expr(vi = k) - expr(vi = 0) for each lane k < vec, as ints (None where not constant)."""
    base = substitute(expr, {vi: ir.const(0)})
    return [ir.int_value(analyzer.simplify(ir.binary("sub", substitute(expr, {vi: ir.const(k)}),
                                                     base))) for k in range(vec)]


def contiguous(expr, vi, vec: int, analyzer, aligned=True) -> bool:
    """Whether expr(vi = k) == expr(0) + k for every lane k < vec (and, `aligned`, expr(0) is
    a multiple of vec)."""
    if lane_steps(expr, vi, vec, analyzer) != list(range(vec)):
        return False
    return not aligned or analyzer.is_divisible(substitute(expr, {vi: ir.const(0)}), vec)
