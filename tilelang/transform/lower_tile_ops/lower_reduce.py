"""Lower `T.reduce_*` and `T.cumsum`/`T.cummax`.

Expects: layouts inferred. Guarantees:
  * fragment → fragment reductions (dst laid out as src projected, the normal case) become, per
    thread: a register-local combine over the values the thread holds, xor-shuffles over the
    lanes that share a row (`Fragment.shuffle_plan`), and, when warps split the reduced dim, a
    combine through a shared scratch buffer; then `dst = r` or `dst = combine(dst, r)`
    (`clear=False`);
  * every other reduction (shared operands, mismatched layouts) becomes a parallel loop over dst
    with a serial loop over the reduced dim (fragment src staged through shared memory);
  * scans stage fragments through shared memory and scan each line serially.
Initial values and NaN handling follow SEMANTICS §8.
"""

from __future__ import annotations

import numpy as np

from ...errors import located
from ...ir import nodes as ir
from ...ir.dtype import DType
from ..analysis.fragment_ops import fit_affine_in_digits
from ..analysis.reductions import combine, element, init_value

VOID = DType("void")


def _store(buf, idx, value, loc=None):
    return ir.Store(buf, (idx if isinstance(idx, ir.Expr) else ir.const(idx),), value, loc=loc)


def _load(buf, idx):
    return ir.Load(buf, (idx if isinstance(idx, ir.Expr) else ir.const(idx),), buf.dtype)


def _slot_map(src_layout, dst_layout, dim, keepdim):
    """For each src value index: the dst value index holding its reduced element (the same for
    every thread), or None if it differs between threads."""
    T = src_layout.num_threads
    t = np.arange(T)[:, None]
    v = np.arange(src_layout.num_values)[None, :]
    coords = [np.broadcast_to(np.asarray(c, dtype=np.int64), (T, src_layout.num_values))
              for c in src_layout.coords(t, v)]
    guard = src_layout.guard(t, v)
    active = np.ones((T, src_layout.num_values), bool) if guard is None else \
        np.broadcast_to(np.asarray(guard, bool), (T, src_layout.num_values))
    kept = [c for d, c in enumerate(coords) if d != dim]
    if keepdim:
        kept.insert(dim, np.zeros_like(coords[0]))
    safe = [np.where(active, c, 0) for c in kept]
    table = dst_layout._holder_table()
    slot = table[(1,) + tuple(safe)]
    holder_coords = [np.asarray(c) for c in dst_layout.coords(
        np.broadcast_to(t, slot.shape), np.where(active, slot, 0))]
    owns = np.all([np.broadcast_to(h, slot.shape) == s for h, s in zip(holder_coords, safe)],
                  axis=0) | ~active
    if not owns.all():
        return None, active
    col = np.where(active, slot, -1)
    per_v = col.max(axis=0)
    if not np.all((col == per_v[None, :]) | ~active):
        return None, active
    return per_v, active


def _check_warp_aligned(r: ir.Reduce, F) -> None:
    problem = F.misaligned_reduce(r.dim)  # also checked while tracing (language/tile_ops.py)
    if problem:
        raise located(ValueError)(f"T.reduce_{r.kind} of {r.src.name} {problem}", r.loc)


class ReduceLowering:
    def __init__(self, ctx):
        self.ctx = ctx

    def lower(self, r: ir.Reduce) -> ir.Stmt:
        src, dst = r.src, r.dst
        if src.scope == "local.fragment" and dst.scope == "local.fragment":
            F, P = self.ctx.layouts[src], self.ctx.layouts[dst]
            _check_warp_aligned(r, F)
            keepdim = dst.ndim == src.ndim
            per_v, active = _slot_map(F, P, r.dim, keepdim)
            if per_v is not None and active.all():
                return self.fragment_reduce(r, F, P, per_v)
        return self.generic_reduce(r)

    def fragment_reduce(self, r, F, P, per_v):
        ctx = self.ctx
        dt = r.dst.dtype
        src_reg, dst_reg = ctx.register_of(r.src), ctx.register_of(r.dst)
        red = ir.Buffer(f"{r.dst.name}_red", (P.num_values,), dt, "local")
        stmts = []
        s = ir.Var("s")
        stmts.append(ir.For(s, ir.const(0), ir.const(P.num_values), "unroll",
                            _store(red, s, init_value(r.kind, dt))))
        fn = fit_affine_in_digits(F, per_v)
        v = ir.Var("v")
        if fn is not None:
            slot = fn(v)
            body = _store(red, slot, combine(r.kind, _load(red, slot),
                                             element(r.kind, _load(src_reg, v), dt),
                                             r.nan_propagate))
            stmts.append(ir.For(v, ir.const(0), ir.const(F.num_values), "unroll", body))
        else:
            for vi in range(F.num_values):
                slot = int(per_v[vi])
                stmts.append(_store(red, slot, combine(r.kind, _load(red, slot),
                                                       element(r.kind, _load(src_reg, vi), dt),
                                                       r.nan_propagate)))
        try:
            plan = F.shuffle_plan(r.dim)
        except ValueError as exc:  # the reference's words: the threads of one output row
            lanes = int(np.prod([sp.extent for sp in F.threads_spanning(r.dim)]))
            raise located(ValueError)(
                f"T.reduce_{r.kind} of {r.src.name} along dim {r.dim}: the threads that share "
                f"one output (logical_width = {lanes}) must form a positive power of two "
                f"lanes of a warp, or whole warps ({exc}); pick a tile width or thread count "
                "that is a power of two", r.loc) from None
        stmts.extend(self._exchange(plan, r.kind, P, red, r.dst, r.nan_propagate))
        final = _load(red, s)
        if not r.clear and r.kind != "abssum":
            final = combine(r.kind, _load(dst_reg, s), final, r.nan_propagate)
        stmts.append(ir.For(s, ir.const(0), ir.const(P.num_values), "unroll",
                            _store(dst_reg, s, final)))
        return ir.Allocate(red, ir.Seq(tuple(stmts)), loc=r.loc)

    def _exchange(self, plan, kind, P, red, dst, nan_propagate=False):
        """Statements combining `red` (each thread's values of `dst`, laid out as P) across the
        threads of `plan`: xor shuffles within a warp, then shared memory across warps; after
        them every thread of the plan holds the combined values."""
        s = ir.Var("s")
        stmts = []
        for mask in plan.masks:
            shuffled = ir.Call("shfl_xor", (_load(red, s), ir.const(mask), ir.const(32)),
                               red.dtype)
            stmts.append(ir.For(s, ir.const(0), ir.const(P.num_values), "unroll",
                                _store(red, s, combine(kind, _load(red, s), shuffled,
                                                       nan_propagate))))
        if plan.cross_warp:
            stmts.extend(self._cross_warp(kind, dst, P, red, plan.cross_warp))
        return stmts

    def combine_replicas(self, buf, kind: str, loc=None) -> ir.Stmt:
        """The finalize of a reducer kept as register partials (transform/reducer_fragments.py):
        every copy of each element of `buf` (the threads of its layout's replication modes)
        becomes the combination of all of them. Replication modes that are not power-of-two
        lane blocks combine through shared memory alone."""
        from ...layout.fragment import ShufflePlan

        P = self.ctx.layouts[buf]
        try:
            plan = P.replica_plan()
        except ValueError:
            plan = ShufflePlan((), tuple(P.replica_spans()))
        if not plan.masks and not plan.cross_warp:
            return ir.Seq((), loc=loc)  # each thread's partials are already whole
        reg = self.ctx.register_of(buf)
        return ir.Seq(tuple(self._exchange(plan, kind, P, reg, buf)), loc=loc)

    def _cross_warp(self, kind, dst, P, red, spans):
        """Combine the per-warp partials through shared memory (warps along the reduced dim)."""
        ctx = self.ctx
        dt = red.dtype
        n_parts = 1
        for sp in spans:
            n_parts *= sp.extent
        dst_numel = int(np.prod(dst.shape))
        scratch = ctx.add_scratch_shared(f"{dst.name}_partials", (n_parts, dst_numel), dt)
        tid = ctx.tid
        part, mult = ir.const(0), 1
        for sp in spans:
            digit = ir.binary("floormod", ir.binary("floordiv", tid, sp.index_stride), sp.extent)
            part = ir.binary("add", part, ir.binary("mul", digit, mult))
            mult *= sp.extent
        s = ir.Var("s")
        flat = _flat_coord(P.coords(tid, s), dst.shape)
        held = P.guard(tid, s)  # slots past the shape (a rounded-up layout) hold nothing

        def guarded(stmt):
            return stmt if held is None else ir.If(ir.as_expr(held), stmt, None)

        write = ir.For(s, ir.const(0), ir.const(P.num_values), "unroll",
                       guarded(ir.Store(scratch, (part, flat), _load(red, s))))
        w = ir.Var("w")
        acc = ir.Buffer(f"{dst.name}_acc", (1,), dt, "local.var")
        combine_loop = ir.For(w, ir.const(0), ir.const(n_parts), "unroll",
                              ir.Store(acc, (ir.const(0),),
                                       combine(kind, ir.Load(acc, (ir.const(0),), dt),
                                               ir.Load(scratch, (w, flat), dt))))
        read = ir.For(s, ir.const(0), ir.const(P.num_values), "unroll",
                      guarded(ir.Allocate(acc, ir.Seq((combine_loop,
                                                       _store(red, s, ir.Load(
                                                           acc, (ir.const(0),), dt)))),
                                          init_value(kind, dt))))
        sync = ir.Evaluate(ir.Call("call_extern", ("__syncthreads",), VOID))
        return [sync, write, sync, read, sync]

    def generic_reduce(self, r: ir.Reduce) -> ir.Stmt:
        """dst[idx] (op)= reduce_k src[idx with k]: a parallel loop over dst, serial over k."""
        ctx = self.ctx
        src, dst = r.src, r.dst
        pre = []
        if src.scope == "local.fragment":
            staged = ctx.add_scratch_shared(f"{src.name}_staged", src.shape, src.dtype)
            pre.append(copy_loop(src, staged, ctx))
            src = staged
        dt = dst.dtype
        keepdim = dst.ndim == src.ndim
        out_shape = [e for d, e in enumerate(src.shape) if d != r.dim]
        vars_ = [ir.Var(n) for n in "ijklmn"[:len(out_shape)]]
        k = ir.Var("k")
        src_idx, it = [], iter(vars_)
        for d in range(src.ndim):
            src_idx.append(k if d == r.dim else next(it))
        dst_idx = list(vars_)
        if keepdim:
            dst_idx.insert(r.dim, ir.const(0))
        acc = ir.Buffer("acc", (1,), dt, "local.var")
        acc_v = ir.Load(acc, (ir.const(0),), dt)
        loop_k = ir.For(k, ir.const(0), ir.const(src.shape[r.dim]), "serial",
                        ir.Store(acc, (ir.const(0),),
                                 combine(r.kind, acc_v, element(
                                     r.kind, ir.Load(src, tuple(src_idx), src.dtype), dt),
                                     r.nan_propagate)))
        final = acc_v
        if not r.clear and r.kind != "abssum":
            final = combine(r.kind, ir.Load(dst, tuple(dst_idx), dt), acc_v, r.nan_propagate)
        body = ir.Allocate(acc, ir.Seq((loop_k, ir.Store(dst, tuple(dst_idx), final))),
                           init_value(r.kind, dt))
        layout = ctx.layouts.get(dst) if dst.scope == "local.fragment" else None
        if layout is not None and keepdim:
            layout = layout.project(
                [d for d in range(dst.ndim) if d != r.dim])
        nest = _parallel(vars_, out_shape, body, layout, r.loc)
        return ir.Seq(tuple(pre) + (nest,))

    def lower_scan(self, c: ir.CumSum) -> ir.Stmt:
        ctx = self.ctx
        src, dst = c.src, c.dst
        pre, post = [], []
        work = src
        if src.scope == "local.fragment" or dst.scope == "local.fragment" or src is not dst:
            work = ctx.add_scratch_shared(f"{dst.name}_scan", src.shape, dst.dtype)
            pre.append(copy_loop(src, work, ctx))
            post.append(copy_loop(work, dst, ctx))
        n = src.shape[c.dim]
        other = [e for d, e in enumerate(src.shape) if d != c.dim]
        vars_ = [ir.Var(nm) for nm in "ijklmn"[:len(other)]]
        k = ir.Var("k")
        idx, it = [], iter(vars_)
        for d in range(src.ndim):
            pos = ir.binary("sub", n - 1, k) if c.reverse else k
            idx.append(pos if d == c.dim else next(it))
        dt = work.dtype
        acc = ir.Buffer("acc", (1,), dt, "local.var")
        acc_v = ir.Load(acc, (ir.const(0),), dt)
        op = "max" if c.kind == "max" else "sum"
        step = ir.Seq((ir.Store(acc, (ir.const(0),), combine(op, acc_v, ir.cast_to(
            ir.Load(work, tuple(idx), work.dtype), dt))), ir.Store(work, tuple(idx), acc_v)))
        body = ir.Allocate(acc, ir.For(k, ir.const(0), ir.const(n), "serial", step),
                           init_value(op, dt))
        nest = _parallel(vars_, other, body, None, c.loc) if vars_ else ir.If(
            ir.compare("eq", ctx.tid, 0), body, None)
        return ir.Seq(tuple(pre) + (nest,) + tuple(post))


def _flat_coord(coords, shape):
    flat = ir.const(0)
    for c, n in zip(coords, shape):
        flat = ir.binary("add", ir.binary("mul", flat, n), c)
    return flat


def _parallel(vars_, extents, body, layout, loc):
    ann = (("loop_layout", layout),) if layout is not None else ()
    stmt = body
    for v, e in reversed(list(zip(vars_, extents))):
        stmt = ir.For(v, ir.const(0), ir.const(e), "parallel", stmt, 1, ann, loc=loc)
        ann = ()
    if layout is not None and isinstance(stmt, ir.For):
        stmt = ir.with_fields(stmt, annotations=(("loop_layout", layout),))
    return stmt


def copy_loop(src, dst, ctx):
    """`dst = src` element by element (the whole buffers), as a parallel loop laid out like
    whichever of the two is a fragment."""
    vars_ = [ir.Var(n) for n in "ijklmn"[:src.ndim]]
    body = ir.Store(dst, tuple(vars_), ir.cast_to(ir.Load(src, tuple(vars_), src.dtype),
                                                   dst.dtype))
    frag = src if src.scope == "local.fragment" else dst if dst.scope == "local.fragment" \
        else None
    layout = ctx.layouts.get(frag) if frag is not None else None
    return _parallel(vars_, list(src.shape), body, layout, None)


