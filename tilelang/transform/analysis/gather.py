"""Gather nests: element-wise `T.Parallel` loads of global data into a shared tile that are
not a rectangular window (im2col, indexed rows),

    for i, j in T.Parallel(BM, BK):
        S[i, j] = T.if_then_else(cond(i, j), G[f(i, j), ..., g(i, j)], 0)    # or S[i, j] = G[...]

recognised at tile level. The pipeliner and the warp specializer make such a nest a producer
stage like a `T.copy` and mark the copies they issue ahead with ASYNC_GATHER; partition_parallel
lowers marked nests to cp.async with zero-fill (transform/partition_parallel/async_gather.py).
"""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.visitor import any_node
from .scopes import SHARED

ASYNC_GATHER = ("async_gather", True)  # a gather nest issued ahead (an asynchronous producer)


def _nest(loop: ir.For):
    """(loop vars, body) of a perfect chain of parallel loops starting at 0, or None."""
    vars_, s = [], loop
    while isinstance(s, ir.For) and s.kind == "parallel":
        if s.step != 1 or ir.int_value(s.start) != 0 or ir.int_value(s.extent) is None:
            return None
        vars_.append(s.var)
        s = s.body
    return (vars_, s) if vars_ else None


def peel_lets(body):
    """(lets [(var, value)], innermost statement) of a chain of LetStmts."""
    lets = []
    while isinstance(body, ir.LetStmt):
        lets.append((body.var, body.value))
        body = body.body
    return lets, body


def is_zero_value(e) -> bool:
    """Whether `e` is the constant 0 (through a cast)."""
    if isinstance(e, ir.Cast):
        e = e.value
    return isinstance(e, ir.Const) and e.value == 0


def split_value(value):
    """(load, cond) of a gathered value `G[...]` or `if_then_else(cond, G[...], 0)`; cond is
    None for an unconditional load. None when the value is anything else."""
    cond = None
    if isinstance(value, ir.Select) and is_zero_value(value.false_value):
        cond, value = value.cond, value.true_value
    if isinstance(value, ir.Load) and value.buffer.scope == "global":
        return value, cond
    return None


def gather_parts(loop: ir.For):
    """(store, load, cond) when `loop` is a gather nest (see the module docstring): a parallel
    nest whose body is lets and one store into a shared buffer of the same dtype as the global
    buffer loaded, whose indices read no memory. None otherwise."""
    if not isinstance(loop, ir.For) or loop.kind != "parallel":
        return None
    nest = _nest(loop)
    if nest is None:
        return None
    _, body = nest
    lets, store = peel_lets(body)
    if not isinstance(store, ir.Store) or store.buffer.scope not in SHARED:
        return None
    parts = split_value(store.value)
    if parts is None:
        return None
    load, cond = parts
    if load.buffer.dtype is not store.buffer.dtype or store.buffer.dtype.bits < 8:
        return None
    # addresses computed from memory (an indirect gather) are fine for correctness but the
    # pipeliner would have to prove that memory stable; keep to pure index arithmetic
    exprs = [v for _, v in lets] + list(store.indices) + list(load.indices)
    if cond is not None:
        exprs.append(cond)
    if any(any_node(e, lambda n: isinstance(n, (ir.Load, ir.Call))) for e in exprs):
        return None
    return store, load, cond
