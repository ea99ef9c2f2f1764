"""Packed x2 stores (`tl::store_packed2<P>(&C[i], tree)`, language/packed_x2.py): run as the
two element stores they stand for, each lane's value the op tree over the lanes of its
`tl::load_packed2` pairs (the same lane values the lane-by-lane form computes)."""

from __future__ import annotations

from ..ir import nodes as ir
from ..language.packed_x2 import LOAD, OPS, STORE, lane_value

__all__ = ["is_packed_x2", "compile_packed_store"]


def is_packed_x2(name: str) -> bool:
    return name.startswith((STORE, LOAD)) or name.startswith("tl::") and name[4:] in OPS


def _element(start: ir.Load, k: int) -> ir.Load:
    *outer, last = start.indices
    return ir.Load(start.buffer, tuple(outer) + (ir.binary("add", last, k),), start.dtype)


def _lane(e, k):
    """Lane k of a packed expression."""
    name = e.args[0]
    if name.startswith(LOAD):
        return _element(e.args[1].args[0], k)
    if name.startswith("tl::") and name[4:] in OPS:
        return lane_value(name[4:], *(_lane(a, k) for a in e.args[1:]))
    raise NotImplementedError(f"the CPU interpreter cannot run `{name}` in a packed x2 value")


def compile_packed_store(c, e: ir.Call, name: str):
    if not name.startswith(STORE):
        raise NotImplementedError(f"`{name}` outside a packed x2 store (tl::store_packed2)")
    start, value = e.args[1].args[0], e.args[2]
    loc = c.statement_loc
    stores = []
    for k in range(2):
        target = _element(start, k)
        stores.append(ir.Store(start.buffer, target.indices, _lane(value, k), loc=loc))
    run = c.stmt(ir.Seq(tuple(stores), loc=loc))

    def f(ctx):
        run(ctx, ctx.mask)
        return None
    return f
