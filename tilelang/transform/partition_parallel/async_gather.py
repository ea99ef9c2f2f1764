"""Asynchronous gathers: element-wise `T.Parallel` loads of global data into shared memory that
are not a rectangular window (im2col, indexed rows), issued as cp.async with zero-fill.

    for i, j in T.Parallel(BM, BK):
        S[i, j] = T.if_then_else(cond(i, j), G[f(i, j), ..., g(i, j)], 0)    # or S[i, j] = G[...]

The nests are recognised at tile level by `gather_parts` (transform/analysis/gather.py: the
pipeliner makes such a nest a producer stage like a `T.copy` and marks the issued copies with
ASYNC_GATHER). `lower_async_gather(...)` runs inside `partition_parallel` on a marked nest,
once the loop layout has fixed each thread's elements. Expects: the nest body instantiated for value index
  `v = vo * vec + vi`, consecutive `vi` walking the innermost dim. Guarantees: for the widest w
  (w elements = 16, 8 or 4 bytes, w | vec) such that, for every w-lane group, the shared
  address and the global address are contiguous and w-aligned, every global index but the last
  is the same for the whole group and the predicate is uniform over it, each group becomes
  `cp_async_zfill<w * esize>(&S[..], &G[..], nbytes)` where nbytes counts the valid source
  bytes: 0 when the predicate is false or the row lies outside the tensor (the source address
  is then clamped to element 0), fewer than w elements at a ragged innermost edge. Zero-filled
  bytes are exactly the 0 the synchronous form stores (SEMANTICS §2: out-of-bounds loads read
  0), so the shared tile is identical. Returns None (the caller keeps the synchronous form)
  when no width qualifies.
"""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.visitor import Mutator, any_node, substitute
from ..analysis.gather import peel_lets, split_value
from ..analysis.indices import Widen, contiguous, flat_offset, wide_indices

VOID = ir.DType("void")
INT = ir.DType("int32")


# ---- lowering (inside partition_parallel) ----------------------------------------------------

def _mentions(e, var) -> bool:
    return any_node(e, lambda n: n is var)


def _uniform_predicate(cond, vr, w, analyzer):
    """`cond` rewritten without `vr` when it provably has one value for every vr in [0, w)
    (given the enclosing bindings), else None. Comparisons `r + vr < 0` / `r + vr >= 0` with r
    a multiple of w have the value of `r < 0` / `r >= 0`: the lanes never straddle 0."""

    class Rewrite(Mutator):
        def visit_Compare(self, e):
            if not _mentions(e, vr):
                return e
            if e.op in ("lt", "ge"):
                d, op = ir.binary("sub", e.a, e.b), e.op
            elif e.op in ("gt", "le"):
                d, op = ir.binary("sub", e.b, e.a), "lt" if e.op == "gt" else "ge"
            else:
                return e
            lin = analyzer.detect_linear(d, vr)
            if lin is None:
                return e
            coef, rest = lin
            if isinstance(coef, int) and coef == 0:
                return ir.compare(op, rest, 0)
            if isinstance(coef, int) and coef == 1 and analyzer.is_divisible(rest, w):
                return ir.compare(op, rest, 0)
            return e

    out = analyzer.simplify(Rewrite().visit(cond))
    return None if _mentions(out, vr) else out


def _group(ctx, store, load, cond, vr, w, analyzer):
    """The cp.async statement for one w-lane group, or None when the group does not qualify."""
    sbuf, gbuf = store.buffer, load.buffer
    esize = gbuf.dtype.bytes
    if w * esize not in (4, 8, 16):
        return None
    soff = flat_offset(ctx, sbuf, store.indices)
    if soff is None or not contiguous(soff, vr, w, analyzer):
        return None
    strides = gbuf.effective_strides()
    if not (isinstance(strides[-1], int) and strides[-1] == 1):
        return None
    for st in strides[:-1]:
        if not analyzer.is_divisible(ir.as_expr(st), w):
            return None  # a row start would break the source's w-alignment
    gidx = [analyzer.simplify(i) for i in load.indices]
    if any(_mentions(i, vr) for i in gidx[:-1]) or not contiguous(gidx[-1], vr, w, analyzer):
        return None
    pred = None
    if cond is not None:
        pred = _uniform_predicate(cond, vr, w, analyzer)
        if pred is None:
            return None
    at0 = {vr: ir.const(0)}
    gidx0 = [substitute(i, at0) for i in gidx]
    sidx0 = tuple(substitute(i, at0) for i in store.indices)
    if wide_indices(gbuf, ctx):
        # the byte count below is computed from these indices: int64 from the leaves up
        gidx0 = [Widen().visit(ir.as_expr(i)) for i in gidx0]
    # rows outside the tensor and a false predicate read nothing; the innermost dim may be
    # partly inside (its start is a multiple of w, so a negative start means all outside)
    row_ok = pred
    implied = _conjuncts(pred, analyzer) if pred is not None else []
    inner, n_inner = gidx0[-1], gbuf.shape[-1]
    bounds = [c for i, n in zip(gidx0[:-1], gbuf.shape[:-1])
              for c in (ir.compare("ge", i, 0), ir.compare("lt", i, n))]
    for c in bounds + [ir.compare("ge", inner, 0)]:
        if analyzer.prove(c):
            continue
        c = analyzer.simplify(c)
        if any(ir.structural_equal(c, p) for p in implied):
            continue  # the user's predicate already checks it (the usual padding test)
        row_ok = c if row_ok is None else ir.logical_and(row_ok, c)
    src_bytes = None
    if not analyzer.prove(ir.compare("le", ir.binary("add", inner, w), n_inner)):
        valid = ir.binary("min", ir.binary("max", ir.binary("sub", n_inner, inner), 0), w)
        src_bytes = ir.binary("mul", valid, esize)
    if row_ok is not None:
        row_ok = analyzer.simplify(row_ok)
        src_bytes = ir.select(row_ok, src_bytes if src_bytes is not None
                              else ir.const(w * esize), ir.const(0))
    nbytes = None
    if src_bytes is not None:
        nbytes = ir.Var("nbytes")
        some = ir.compare("gt", nbytes, 0)
        gidx0 = [ir.select(some, i, 0) for i in gidx0]  # keep the address inside the tensor
    src = ir.Call("address_of", (ir.Load(gbuf, tuple(gidx0), gbuf.dtype),), ir.DType("handle"))
    dst = ir.Call("address_of", (ir.Load(sbuf, sidx0, sbuf.dtype),), ir.DType("handle"))
    attrs = (("async", True),)  # ordered with its readers by the pipeliner's wait + barrier
    nb = w * esize
    if nbytes is None:
        call = ir.Call("call_extern", (f"tl::cp_async<{nb}>", dst, src), VOID, attrs)
    else:
        call = ir.Call("call_extern", (f"tl::cp_async_zfill<{nb}>", dst, src, nbytes), VOID,
                       attrs)
    stmt = ir.Evaluate(call, loc=store.loc)
    if nbytes is not None:
        stmt = ir.LetStmt(nbytes, ir.cast_to(src_bytes, INT), stmt, loc=store.loc)
    return stmt


def _conjuncts(cond, analyzer) -> list:
    """The simplified operands of a chain of `and`s."""
    if isinstance(cond, ir.Logical) and cond.op == "and":
        return _conjuncts(cond.a, analyzer) + _conjuncts(cond.b, analyzer)
    return [analyzer.simplify(cond)]


def lower_async_gather(ctx, body, vo, vi, vec: int, analyzer):
    """One `vo` step of a marked gather nest as cp.async groups (see the module docstring), or
    None. `analyzer` has the thread, `vo` and `vi` ranges bound."""
    lets, store = peel_lets(body)
    if not isinstance(store, ir.Store):
        return None
    parts = split_value(store.value)
    if parts is None:
        return None
    load, cond = parts
    # lets are pure index arithmetic (gather_parts): inline them so each group's predicate
    # and addresses are single expressions the analyzer can see through
    env = {}
    for var, value in lets:
        env[var] = substitute(value, env)
    store = ir.Store(store.buffer, tuple(substitute(i, env) for i in store.indices),
                     store.value, loc=store.loc)
    load = ir.Load(load.buffer, tuple(substitute(i, env) for i in load.indices), load.dtype)
    cond = substitute(cond, env) if cond is not None else None
    esize = load.buffer.dtype.bytes
    w = vec
    while w >= 1:
        if vec % w == 0 and w * esize in (4, 8, 16):
            vq, vr = ir.Var("vq"), ir.Var("vr")
            if w == 1:
                lane = vq  # single elements: nothing varies within a group
            else:
                lane = ir.binary("add", ir.binary("mul", vq, w), vr) if w < vec else vr
            sub = {vi: lane}
            with analyzer.scope():
                analyzer.bind(vq, 0, vec // w)
                analyzer.bind(vr, 0, w)
                stmt = _group(ctx, substitute(store, sub), substitute(load, sub),
                              substitute(cond, sub) if cond is not None else None, vr, w,
                              analyzer)
            if stmt is not None:
                if w < vec:
                    stmt = ir.For(vq, ir.const(0), ir.const(vec // w), "unroll", stmt)
                return stmt, w
        w //= 2
    return None
