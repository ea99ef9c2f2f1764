"""Tile operations as loop nests of per-element statements: the form lower_elementwise gives
copies, fills and atomics, and the fallback lower_copies, tma_reduce and the interpreter use
when a faster form does not apply. Each loop carries ("from_tile_op", name) so later passes
can tell it from a user loop."""

from __future__ import annotations

from ...ir import nodes as ir
from .scopes import SHARED, THREAD_PRIVATE


def region_index(region: ir.BufferRegion, loop_vars):
    """Element index of `region` for the loop variables over its non-unit extents."""
    it = iter(loop_vars)
    out = []
    for start, extent in region.region:
        if isinstance(extent, int) and extent == 1 or (
                isinstance(extent, ir.Const) and extent.value == 1):
            out.append(ir.as_expr(start))
        else:
            out.append(ir.binary("add", start, next(it)))
    return tuple(out)


def non_unit_extents(region: ir.BufferRegion):
    """The extents of `region` other than 1 (the dimensions a loop nest walks)."""
    return [e for e in region.extents
            if not (isinstance(e, int) and e == 1 or isinstance(e, ir.Const) and e.value == 1)]


def parallel_nest(extents, make_body, loc, tag: str, per_thread: bool = False):
    """A loop nest over `extents`; `make_body(vars)` builds the innermost body. Parallel
    (spread over the block) unless `per_thread`: a tile op on a thread's private buffer is
    done by each thread entirely."""
    names = ["i", "j", "k", "l", "m", "n"]
    vars_ = [ir.Var(names[d] if d < len(names) else f"i{d}") for d in range(len(extents))]
    body = make_body(vars_)
    if not extents:
        return body
    kind = "unroll" if per_thread else "parallel"
    ann = (("from_tile_op", tag),)
    for v, e in reversed(list(zip(vars_, extents))):
        body = ir.For(v, ir.const(0), ir.as_expr(e), kind, body, 1, ann, loc=loc)
    return body


# loop annotation of a shared -> global copy's nest: (the Copy, the nest's innermost store)
STORE_COPY = "store_copy"


def copy_as_loop(s: ir.Copy) -> ir.Stmt:
    """A copy as a loop nest of element stores (per thread between private buffers)."""
    extents = non_unit_extents(s.src)

    oob_value = dict(s.options).get(ir.OOB_VALUE)  # a T.sblock's T.annotate_safe_value

    def body(vs):
        src_idx = region_index(s.src, vs)
        dst_idx = region_index(s.dst, vs)
        value = ir.Load(s.src.buffer, src_idx, s.src.buffer.dtype)
        if oob_value is not None and s.src.buffer.scope == "global":
            value = ir.load_or(value, oob_value)
        return ir.Store(s.dst.buffer, dst_idx, ir.cast_to(value, s.dst.buffer.dtype),
                        loc=s.loc)

    private = (s.src.buffer.scope in THREAD_PRIVATE or s.dst.buffer.scope in THREAD_PRIVATE)
    return parallel_nest(extents, body, s.loc, "copy", private)


def tma_reduce_candidate(s: ir.AtomicTile) -> bool:
    """T.atomic_add(global region, shared tile, use_tma=True)."""
    return (s.use_tma and s.op == "add" and isinstance(s.src, ir.BufferRegion)
            and s.src.buffer.scope in SHARED and s.dst.buffer.scope == "global")


def store_as_loop(s: ir.AtomicTile):
    """The element-wise stores of src into dst (the first block's part of a cluster sum)."""
    extents = non_unit_extents(s.dst)

    def body(vs):
        value = ir.Load(s.src.buffer, region_index(s.src, vs), s.src.buffer.dtype)
        return ir.Store(s.dst.buffer, region_index(s.dst, vs),
                        ir.cast_to(value, s.dst.buffer.dtype), loc=s.loc)

    return parallel_nest(extents, body, s.loc, "store")


def atomic_as_loop(s: ir.AtomicTile):
    """The element-wise atomics of a tile atomic, as a parallel nest."""
    extents = non_unit_extents(s.dst)

    def body(vs):
        dst = ir.Load(s.dst.buffer, region_index(s.dst, vs), s.dst.buffer.dtype)
        if isinstance(s.src, ir.BufferRegion):
            value = ir.Load(s.src.buffer, region_index(s.src, vs), s.src.buffer.dtype)
        else:
            value = s.src
        call = ir.Call(f"atomic_{s.op}", (dst, ir.cast_to(value, dst.dtype)), dst.dtype,
                       (("memory_order", s.memory_order),))
        return ir.Evaluate(call, loc=s.loc)

    return parallel_nest(extents, body, s.loc, "atomic")
