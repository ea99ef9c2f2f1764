"""A pipelined loop body as a list of items, and the facts both software pipeliners (the
cp.async pipeline, transform/pipeline.py, and the TMA producer warpgroup,
transform/warp_specialize/) need about them: which loop-body lets a producer copy needs,
whether a gather nest may be issued iterations ahead, and how a tile becomes one stage of a
multi-buffered allocation.

Items: the top-level statements of a body, with every `LetStmt` binding its own `LetItem`
(a tuple ("let", var, value, loc), so `isinstance(item, tuple)` tells a let from a statement).
"""

from __future__ import annotations

from typing import NamedTuple

from ... import layout as L
from ...ir import nodes as ir
from ...ir.visitor import Mutator, collect
from .buffer_use import buffers_read, uses_buffer, whole_buffer_user, written_buffers
from .gather import gather_parts, is_zero_value


class LetItem(NamedTuple):
    """A let binding among a body's items (its statement scope is the items after it)."""
    tag: str  # always "let"
    var: ir.Var
    value: ir.Expr
    loc: object


def flatten(body) -> list:
    """Top-level statements of a loop body; let bindings become `LetItem`s."""
    items = []

    def walk(s):
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                walk(x)
        elif isinstance(s, ir.LetStmt):
            items.append(LetItem("let", s.var, s.value, s.loc))
            walk(s.body)
        else:
            items.append(s)

    walk(body)
    return items


def rebuild(items) -> ir.Stmt:
    """The statement `flatten` took apart (lets scope over the items after them)."""
    stmt = None
    for item in reversed(items):
        if isinstance(item, tuple):
            stmt = ir.LetStmt(item[1], item[2], stmt if stmt is not None else ir.Seq(()),
                              loc=item[3])
        elif stmt is None:
            stmt = item
        elif isinstance(stmt, ir.Seq):
            stmt = ir.Seq((item,) + stmt.stmts)
        else:
            stmt = ir.Seq((item, stmt))
    return stmt if stmt is not None else ir.Seq(())


def stack_layout(layout, stages: int, elem_bytes: int):
    """`layout` repeated `stages` times along a new leading dimension. Each stage starts on a
    128-byte boundary: the TMA and bulk copies that fill the stages need it (a stage of 80
    float32 values would otherwise put the second stage 320 bytes in)."""
    if getattr(layout, "swizzle_bytes", None):
        return L.swizzled((stages,) + tuple(layout.shape), layout.elem_bits)
    size = layout.physical_size
    stride = -(-size * elem_bytes // 128) * 128 // elem_bytes
    if layout.is_row_major() and stride == size:
        return L.row_major((stages,) + tuple(layout.shape))
    return L.Layout((stages,) + tuple(layout.shape),
                    lambda s, *idx: s * stride + layout.forward(*idx),
                    physical_size=stride * stages)


class Rebuffer(Mutator):
    """Replace buffer B by B_stages[stage, ...] everywhere (`mapping`: B -> B_stages)."""

    def __init__(self, mapping, stage):
        self.mapping = mapping
        self.stage = stage

    def visit_Load(self, e):
        nb = self.mapping.get(e.buffer)
        idx = tuple(self.visit(i) for i in e.indices)
        if nb is None:
            return e if all(a is b for a, b in zip(idx, e.indices)) else ir.Load(e.buffer, idx,
                                                                                 e.dtype)
        return ir.Load(nb, (self.stage,) + idx, e.dtype)

    def visit_Store(self, s):
        nb = self.mapping.get(s.buffer)
        idx = tuple(self.visit(i) for i in s.indices)
        value = self.visit(s.value)
        if nb is None:
            return ir.Store(s.buffer, idx, value, loc=s.loc)
        return ir.Store(nb, (self.stage,) + idx, value, loc=s.loc)

    def visit_BufferRegion(self, r):
        nb = self.mapping.get(r.buffer)
        region = tuple((self.visit(a), self.visit(b)) for a, b in r.region)
        if nb is None:
            return ir.BufferRegion(r.buffer, region)
        return ir.BufferRegion(nb, ((self.stage, 1),) + region)


def gather_exprs(loop) -> list:
    """Every expression of a gather nest (for the loop-body lets it needs)."""
    return collect(loop, lambda n: isinstance(n, ir.Var))


class _NotRecomputable(Exception):
    pass


def lets_needed(exprs, lets, written):
    """The loop-body lets (`lets`: var -> LetItem) `exprs` need, in order, if all are
    recomputable for another iteration (None when one reads memory the loop writes)."""
    needed, order = set(), []

    def need(expr):
        for v in collect(expr, lambda n: isinstance(n, ir.Var)):
            if v in lets and v not in needed:
                let = lets[v]
                if buffers_read(let.value) & written:
                    raise _NotRecomputable
                needed.add(v)
                need(let.value)
                order.append(let)

    try:
        for e in exprs:
            need(e)
    except _NotRecomputable:
        return None
    return order


def copy_lets_needed(copy: ir.Copy, lets, written):
    """The lets a copy's regions need, in order, if all are recomputable for another
    iteration (None otherwise)."""
    exprs = []
    for start, extent in list(copy.src.region) + list(copy.dst.region):
        exprs += [ir.as_expr(start), ir.as_expr(extent)]
    return lets_needed(exprs, lets, written)


def has_safe_value(kernel: ir.Kernel, buf) -> bool:
    """Whether `T.annotate_safe_value` gave `buf` a value for out-of-bounds reads."""
    return any(key == "safe_value" and value[0] is buf for key, value in kernel.attrs)


def copy_oob_value(kernel: ir.Kernel, copy: ir.Copy):
    """What the copy's source reads outside its tensor when that is not 0 (a `T.sblock`'s
    or the kernel's `T.annotate_safe_value`), else None: TMA and cp.async fill zeros."""
    value = dict(copy.options).get(ir.OOB_VALUE)
    if value is None:
        value = next((v[1] for key, v in kernel.attrs
                      if key == "safe_value" and v[0] is copy.src.buffer), None)
    return None if value is None or is_zero_value(ir.as_expr(value)) else value


def gather_producer(kernel: ir.Kernel, st, items, outside, written) -> bool:
    """A gather nest may be issued iterations ahead: it reads nothing the loop writes, its
    tile is written by nothing else and used only inside the loop (per stage), and its
    source has no `T.annotate_safe_value` (cp.async fills zeros)."""
    parts = gather_parts(st) if isinstance(st, ir.For) else None
    if parts is None:
        return False
    store, load, _ = parts
    dst = store.buffer
    if buffers_read(st) & written or uses_buffer(outside, dst) or \
            has_safe_value(kernel, load.buffer):
        return False
    others = [it for it in items if not isinstance(it, tuple) and it is not st]
    return not any(dst in written_buffers(o) for o in others) and \
        not any(whole_buffer_user(o, dst) for o in others)
