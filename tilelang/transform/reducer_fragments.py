"""Reducers (T.alloc_reducer) as register partials combined across threads at the finalize.

Expects: tile IR as traced (language/reducer.py): each reducer a shared buffer named by a
kernel attribute ("reducer", (buffer, op)), its contributions `atomic_<op>(r[idx], x)`
evaluations, its (re)starts `Fill`s and its ends `Attr("reducer_finalize", r)` markers.

Guarantees: no "reducer" kernel attribute remains, and every reducer takes one of two forms.

* Register partials (the reference's layout), chosen when every contribution comes from a
  T.Parallel nest of constant extents: each thread accumulates its own partial of the elements
  its iterations touch, with plain register updates, and the finalize combines the partials
  across threads once. The reducer becomes a fragment (`ctx.reducer_partials` maps it to its
  op: add, max, min, bitand, bitor, bitxor); each contribution becomes `r[idx] = r[idx] op x` inside `Attr("reducer_update", r)`,
  which tells layout inference that the store accumulates (the loop need not write every copy
  of the element, and must not reach it through shared memory) and partition_parallel that one
  thread per iteration contributes (a replicated loop layout runs an iteration on several
  threads, see `contribute_once`); the finalize marker stays, and lower_tile_ops combines the
  copies of every element there (shuffles within a warp, shared memory across warps:
  lower_reduce.ReduceLowering.combine_replicas), after which each copy holds the total. A
  sum's (or xor's) start value other than zero is kept aside (in the fragment `<r>_start`,
  each copy filled with it) while the partials start at zero, and combined once after the
  combine: started at the value, every copy would count it once.

  Chosen only when, in program order (a loop body walked twice: its end meets its start),
  every contribution happens after a fill of the whole reducer and before its finalize, each
  index of a contribution is a loop variable of the nest or free of them, no contribution
  is under a branch on the thread index outside its nest (or in a T.ws role) (the same indices
  for every contribution of one nest, as for any fragment), the contribution does not read
  the reducer, and the reducer is otherwise only read, after a finalize.

* Shared memory with atomics (the traced form, markers dropped), everywhere else: a
  contribution made at block level or from a thread-dependent branch (each thread its own),
  indices the nest cannot own (`r[i // 2]`, a histogram `r[idx[j]]`), reads of a running
  total, a T.Parallel nest of symbolic extents. Atomics in shared memory serve any thread and
  any index at any moment; the price is one atomic per contribution (the reference's gemv ran
  five times slower that way). Pass config `tl.reducer_force_baseline` keeps every reducer
  in this form (differential testing).

The interpreter runs the traced form; both forms give its results.
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.thread_range import role_group
from ..ir.visitor import Mutator, Visitor, any_node, collect
from ..language.reducer import FINALIZE, REDUCER_ATOMICS
from .analysis import fragment_access as FA
from .analysis.reductions import KIND, UPDATE, combine
from .pass_config import PassConfigKey


# ops for which a start value held by every copy would count once per copy (max, min, bitand
# and bitor are idempotent: the copies may all start at it)
_COUNTS_START = ("add", "bitxor")

# program-order states of one reducer
_START, _OPEN, _FINAL, _MIXED = "start", "open", "final", "mixed"


class _Unfit(Exception):
    """The reducer needs the shared-memory form."""


def _update_target(s):
    """(reducer buffer, indices, contribution) of an atomic contribution statement, else None."""
    if not isinstance(s, ir.Evaluate):
        return None
    c = s.value
    if isinstance(c, ir.Call) and c.op in REDUCER_ATOMICS and \
            c.args and isinstance(c.args[0], ir.Load):
        return c.args[0].buffer, c.args[0].indices, c.args[1]
    return None


def _is_zero(e) -> bool:
    while isinstance(e, ir.Cast):
        e = e.value
    return isinstance(e, ir.Const) and e.value == 0


def _whole(region: ir.BufferRegion) -> bool:
    for (start, extent), size in zip(region.region, region.buffer.shape):
        extent = ir.as_expr(extent)
        if not (_is_zero(ir.as_expr(start)) and isinstance(extent, ir.Const)
                and extent.value == size):
            return False
    return True


class _Check(Visitor):
    """Walks the kernel in program order for one reducer; raises _Unfit where the register
    form would change a result."""

    def __init__(self, buf, thread_vars):
        self.buf = buf
        self.thread_vars = thread_vars
        self.in_role = False  # under a branch on the thread index (or a T.ws role)
        self.state = _START
        self.nest = None  # loop variables of the enclosing T.Parallel nest
        self.nest_indices = {}  # id(outermost parallel loop) -> indices of its contributions
        self.outer = None

    def _mentions(self, node) -> bool:
        return node is not None and any_node(node, lambda n: n is self.buf)

    def visit_Evaluate(self, s):
        target = _update_target(s)
        if target is None or target[0] is not self.buf:
            return self._other(s)
        _, indices, value = target
        if self.state != _OPEN or self.nest is None or self.in_role or self._mentions(value):
            raise _Unfit
        kinds = FA.classify(self.buf, indices, self.nest)
        if any(k == FA.MIXED for k, _ in kinds):
            raise _Unfit
        seen = self.nest_indices.setdefault(id(self.outer), indices)
        if len(seen) != len(indices) or not all(ir.structural_equal(a, b)
                                                for a, b in zip(seen, indices)):
            raise _Unfit

    def visit_Fill(self, s):
        if s.dst.buffer is not self.buf:
            return self._other(s)
        if self.nest is not None or not _whole(s.dst) or self._mentions(s.value):
            raise _Unfit
        self.state = _OPEN

    def visit_Attr(self, s):
        if s.key == FINALIZE and s.value is self.buf:
            if self.state != _OPEN or self.nest is not None:
                raise _Unfit
            self.state = _FINAL
            return
        if role_group(s) is not None or s.key == "warp_role":
            self._in_role(s.body)
            return
        self.generic(s)

    def _in_role(self, body):
        """Some threads only: their partials would miss the others' (the shared form)."""
        saved, self.in_role = self.in_role, True
        try:
            self.visit(body)
        finally:
            self.in_role = saved

    def _other(self, s):
        """Any other statement: it may only read the reducer, and only once it is final."""
        if self._mentions(s):
            written = collect(s, lambda n: (isinstance(n, ir.Store) and n.buffer is self.buf))
            dsts = collect(s, lambda n: isinstance(n, (ir.Copy, ir.AtomicTile, ir.Reduce,
                                                       ir.CumSum, ir.Gemm)))
            if written or self.state != _FINAL or any(
                    self._mentions(getattr(d, "dst", None) or getattr(d, "C", None))
                    for d in dsts):
                raise _Unfit
            return
        self.generic(s)

    visit_Store = visit_Copy = visit_AtomicTile = visit_Reduce = visit_CumSum = \
        visit_Gemm = _other

    def visit_If(self, s):
        if self._mentions(s.cond):
            self._other(ir.Evaluate(s.cond))
        before = self.state
        by_thread = self.nest is None and any_node(s.cond, lambda n: any(
            n is v for v in self.thread_vars))
        visit = self._in_role if by_thread else self.visit
        visit(s.then_body)
        after_then, self.state = self.state, before
        if s.else_body is not None:
            visit(s.else_body)
        if self.state != after_then:
            self.state = _MIXED

    def visit_While(self, s):
        self._loop(s, ir.Evaluate(s.cond), False)

    def visit_For(self, s):
        if s.kind == "parallel":
            if not isinstance(s.extent, ir.Const):
                if self._mentions(s.body):
                    raise _Unfit
                return
            outer = self.nest is None
            saved = self.nest
            self.nest = (self.nest or []) + [s.var]
            if outer:
                self.outer = s
            try:
                self.visit(s.body)
            finally:
                self.nest = saved
            return
        runs = isinstance(s.extent, ir.Const) and s.extent.value >= 1
        self._loop(s, None, runs)

    def _loop(self, s, cond, runs):
        if cond is not None and self._mentions(cond):
            self._other(cond)
        before = self.state
        self.visit(s.body)
        self.visit(s.body)  # the next iteration starts where this one ended
        if not runs and self.state != before:
            self.state = _MIXED


def _fits(kernel, buf) -> bool:
    try:
        _Check(buf, kernel.thread_vars).visit(kernel.body)
    except _Unfit:
        return False
    return True


def _parallel_copy(dst, src, loc, combine_with=None):
    """for idx in T.Parallel(shape): dst[idx] = src[idx] (or combined with dst[idx] by
    reduction kind `combine_with`)."""
    vars_ = [ir.Var(n) for n in "ijklmn"[:dst.ndim]]
    value = ir.Load(src, tuple(vars_), src.dtype)
    if combine_with:
        value = combine(combine_with, ir.Load(dst, tuple(vars_), dst.dtype), value)
    body = ir.Store(dst, tuple(vars_), value, loc=loc)
    for v, e in reversed(list(zip(vars_, dst.shape))):
        body = ir.For(v, ir.const(0), ir.const(e), "parallel", body, loc=loc)
    return body


class _ToPartials(Mutator):
    def __init__(self, old, new, op, start):
        self.old, self.new, self.op, self.start = old, new, op, start

    def visit_Buffer(self, b):
        return self.new if b is self.old else b

    def visit_Evaluate(self, s):
        target = _update_target(s)
        if target is None or target[0] is not self.old:
            return self.generic(s)
        _, indices, value = target
        indices = tuple(self.visit(i) for i in indices)
        value = ir.cast_to(self.visit(value), self.new.dtype)
        current = ir.Load(self.new, indices, self.new.dtype)
        store = ir.Store(self.new, indices, combine(KIND[self.op], current, value), loc=s.loc)
        return ir.Attr(UPDATE, self.new, store, loc=s.loc)

    def visit_Fill(self, s):
        if s.dst.buffer is not self.old or self.start is None:
            return self.generic(s)
        start_fill = ir.Fill(ir.BufferRegion.full(self.start), self.visit(s.value), loc=s.loc)
        zero = ir.Fill(ir.BufferRegion.full(self.new), ir.const(0, self.new.dtype), loc=s.loc)
        return ir.Seq((start_fill, zero), loc=s.loc)

    def visit_Attr(self, s):
        if s.key == FINALIZE and s.value is self.old:
            marker = ir.Attr(FINALIZE, self.new, s.body, loc=s.loc)
            if self.start is None:
                return marker
            return ir.Seq((marker, _parallel_copy(self.new, self.start, s.loc, KIND[self.op])),
                          loc=s.loc)
        return self.generic(s)


class _DropMarkers(Mutator):
    def __init__(self, bufs):
        self.bufs = bufs

    def visit_Attr(self, s):
        if s.key == FINALIZE and s.value in self.bufs:
            return s.body
        return self.generic(s)


def lower_reducers(kernel: ir.Kernel, ctx) -> ir.Kernel:
    reducers = [v for k, v in kernel.attrs if k == "reducer"]
    if not reducers:
        return kernel
    attrs = tuple((k, v) for k, v in kernel.attrs if k != "reducer")
    body, allocs, shared = kernel.body, list(kernel.allocs), set()
    baseline = ctx.flag(PassConfigKey.TL_REDUCER_FORCE_BASELINE)
    for buf, op in reducers:
        if baseline or not _fits(ir.with_fields(kernel, body=body), buf):
            shared.add(buf)
            ctx.note(f"reducer {buf.name}: shared memory with atomic updates " + (
                "(tl.reducer_force_baseline)" if baseline else "(contributions not all from "
                "T.Parallel loops, or the running total is read)"))
            continue
        new = ir.Buffer(buf.name, buf.shape, buf.dtype, "local.fragment", loc=buf.loc)
        fills = collect(body, lambda n: isinstance(n, ir.Fill) and n.dst.buffer is buf)
        start = None
        if op in _COUNTS_START and any(not _is_zero(f.value) for f in fills):
            start = ir.Buffer(f"{buf.name}_start", buf.shape, buf.dtype, "local.fragment",
                              loc=buf.loc)
            allocs.append(start)
        body = _ToPartials(buf, new, op, start).visit(body)
        allocs[allocs.index(buf)] = new
        ctx.reducer_partials[new] = op
    if shared:
        body = _DropMarkers(shared).visit(body)
    return ir.with_fields(kernel, body=body, allocs=tuple(allocs), attrs=attrs)


