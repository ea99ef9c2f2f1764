"""Spread T.Parallel loops over the threads of the block; fragments become register arrays.

Expects: layouts inferred (`ctx.layouts`), outermost parallel loops that touch fragments
annotated with ("loop_layout", Fragment). Tile ops other than parallel loops are lowered.

Guarantees: no parallel loop remains. A nest over extents E with loop layout Lp becomes, in
every thread `tid`,

    for v in unroll(Lp.num_values):          # the thread's share of the iteration space
        (i, j, ...) = Lp.coords(tid, v)      # substituted into the body (through the
                                             # loop's IterMap when it has one)
        if Lp.guard(tid, v): body            # only when Lp rounds E up (or the IterMap
                                             # leaves the loop)

Every fragment access F[...] is replaced by the register array of F at the slot the layout
gives, plus, for dims indexed by a value the iteration does not own (a serial loop's
variable), that value's offset along the value modes of those dims; `fragment_access.serve`
checks by enumeration that the executing thread holds the element (layout inference made sure
of it; a failure is an internal error). When the slot is an affine function of the value
digits the loop stays a compact `#pragma unroll` loop; otherwise it is unrolled here. Loops
without fragments use the default element-wise layout; loops with symbolic extents become
grid-stride loops. A `T.vectorized` loop (a thread's own lanes) gets the vector accesses of
vectorize.py.
"""

from __future__ import annotations

import numpy as np

from ...errors import located
from ...ir import nodes as ir
from ...ir.thread_range import InRoleGroups
from ...ir.visitor import Mutator, substitute
from ... import layout as L
from ...layout.index import all_of
from ..analysis import fragment_access as FA
from ..analysis.fragment_ops import fit_affine_in_digits
from ..analysis.buffer_use import buffers_read
from ..analysis.loop_items import flatten, rebuild
from ..analysis.numeric import eval_index
from ..analysis.scoped import ScopedMutator
from ..analysis.reductions import UPDATE as REDUCER_UPDATE, contribute_once
from ..pass_config import PassConfigKey
from .stmatrix import lower_stmatrix
from .vectorize import PARTITIONED


def _err(loc, msg):
    raise located(ValueError)(msg, loc)


class _Unresolvable(Exception):
    pass


class NestPartitioner:
    """Partition one parallel nest (see the module docstring)."""

    def __init__(self, ctx, nest: ir.For, analyzer=None):
        self.ctx = ctx
        self.nest = nest
        self.analyzer = analyzer
        self.vars, self.extents, self.body = [], [], nest
        while isinstance(self.body, ir.For) and self.body.kind == "parallel":
            self.vars.append(self.body.var)
            self.extents.append(self.body.extent)
            self.body = self.body.body
        self.layout = nest.annotation("loop_layout")

    def run(self) -> ir.Stmt:
        if not all(isinstance(e, ir.Const) for e in self.extents):
            return self.grid_stride()
        extents = [e.value for e in self.extents]
        if self.layout is None:
            self.layout = self.ctx.default_loop_layout(extents, self.body)
        Lp = self.layout
        T = self.ctx.num_threads
        if Lp.num_threads != T:
            _err(self.nest.loc, f"T.Parallel loop layout uses {Lp.num_threads} threads but the "
                                f"block has {T}")
        self.iter_map = self.nest.annotation("loop_iter_map")
        self.grid = FA.LoopGrid(Lp, self.vars, extents, self.iter_map)
        self.coord_arrays = self.grid.coords
        self.slot_fns = {}
        self.compact = True
        self.owner = self.nest.annotation("loop_owner")
        if self.owner is not None:
            # each iteration runs only on the threads holding owner[indices] (layout
            # inference gave every thread every iteration); unrolled, so the ownership
            # test is a condition on the thread index alone
            buf, indices = self.owner
            FA.restrict_to_holders(self.grid, buf, self.ctx.layouts[buf], indices)
            self.compact = False
        self.active = self.grid.active
        self._plan_accesses(self.body)
        v = ir.Var("v")
        if self.compact and self.nest.annotation("async_gather"):
            gathered = self.try_async_gather()
            if gathered is not None:
                return gathered
        if self.compact:
            stored = lower_stmatrix(self)
            if stored is not None:
                return stored
            vectorized = self.try_vectorize()
            if vectorized is not None:
                return vectorized
            body = self.instantiate(v)
            return ir.For(v, ir.const(0), ir.const(Lp.num_values), "unroll", body, 1,
                          PARTITIONED, loc=self.nest.loc)
        return ir.Attr("partitioned", True, ir.Seq(tuple(
            self.instantiate(ir.const(k)) for k in range(Lp.num_values))), loc=self.nest.loc)

    # ---- per-access slot planning ------------------------------------------------------------
    def _plan_accesses(self, body):
        planner = self

        class Scan(Mutator):
            accumulating = False

            def visit_Load(self, e):
                planner._plan(e.buffer, e.indices, False)
                return self.generic(e)

            def visit_Store(self, s):
                # a reducer's partial is added to in the copy the thread holds: no need to
                # reach every copy (layout inference served it so)
                planner._plan(s.buffer, s.indices, not self.accumulating)
                return self.generic(s)

            def visit_Attr(self, s):
                if s.key != REDUCER_UPDATE:
                    return self.generic(s)
                self.accumulating = True
                try:
                    return self.generic(s)
                finally:
                    self.accumulating = False

        Scan().visit(body)

    def _plan(self, buf, indices, write):
        if buf.scope != "local.fragment":
            return
        key = (buf, tuple(id(i) for i in indices))
        if key in self.slot_fns:
            if write and not self.slot_fns[key][3]:
                self.slot_fns[key] = None  # planned as a read: plan again as a write
            else:
                return
        P = self.ctx.layouts[buf]
        served = FA.serve(self.grid, buf, P, indices, write)
        if served is None:
            # layout inference stages every access its loop layout cannot serve
            _err(self.nest.loc, f"internal error: fragment {buf.name} (layout {P!r}) is not "
                                f"served by this T.Parallel loop's layout {self.layout!r}; "
                                "please report it (a workaround: T.copy the fragment into a "
                                "shared buffer and index that)")
        # slots of iterations whose element lies outside the fragment (-1: the program guards
        # them) may take any register index: the loop stays compact (vectorisable)
        # (only for a plain access: a window or runtime-fixed dims index other registers)
        plain = not served.fixed and (served.view is None or served.view.layout is P)
        fn = fit_affine_in_digits(self.layout, np.maximum(served.slots, 0),
                                  valid=np.asarray(served.slots) >= 0,
                                  bound=P.num_values if plain else None)
        if fn is None:
            self.compact = False
        self.slot_fns[key] = (fn, served.slots, served.fixed, write, served.view)

    def _owner_guard(self, body, v):
        """Wrap the (unrolled, v constant) iteration in `this thread holds owner[indices]`;
        of replicated holders only the representative writes memory."""
        buf, indices = self.owner
        P = self.ctx.layouts[buf]
        tid = self.ctx.tid
        fn, per_v = self.slot_fns[(buf, tuple(id(i) for i in indices))][:2]
        env = {var: int(a[0, v]) for var, a in zip(self.vars, self.coord_arrays)}
        want = [int(eval_index(i, env)) for i in indices]
        held = P.coords(tid, int(per_v[v]))
        cond = all_of([ir.compare("eq", ir.as_expr(h), ir.const(w))
                         for h, w in zip(held, want) if not (isinstance(h, int) and h == w)])
        if P.replication > 1:
            body = _one_writer(body, P.is_representative(tid),
                               set(self.ctx.registers.values()))
        return body if cond is None else ir.If(cond, body, None, loc=self.nest.loc)

    def try_vectorize(self):
        """Split the value loop into vector lanes when its fastest mode walks the innermost
        dim contiguously (see transform/partition_parallel/vectorize.py)."""
        from .vectorize import lane_invariant, vectorize_value_loop

        Lp = self.layout
        if not Lp.value_modes or self.analyzer is None or \
                self.ctx.flag(PassConfigKey.TIR_DISABLE_VECTORIZE):
            return None
        im = self.iter_map
        if im is not None and (not all(im.modular) or list(im.dim_of) != list(
                range(len(self.vars))) or im.offset[-1]):
            return None  # the innermost loop dim is not the layout's innermost dim
        first = Lp.value_modes[0]
        inner = len(Lp.shape) - 1
        unit = tuple(1 if d == inner else 0 for d in range(len(Lp.shape)))
        vec = first.extent
        if vec < 2 or tuple(first.strides) != unit:
            return None
        groups = Lp.num_values // vec
        # A layout rounded up past the tile (192 columns dealt to 32 lanes of 8) guards its
        # slots; the nest still vectorises when that guard is one condition for a whole
        # vector (the tile ends on a vector boundary), taken around the group like a ragged
        # row bound. A guard splitting a vector keeps the scalar loop: staging the vector's
        # loads would read past the tile for the lanes it turns off.

        def lower(body, vo, vi):
            if Lp.guard_dims and not (isinstance(body, ir.If) and body.else_body is None and
                                      lane_invariant(body.cond, vi, vec, self.analyzer)):
                return None
            return vectorize_value_loop(self.ctx, body, vo, vi, vec, self.analyzer, groups)

        vo, step = self._per_value_group(vec, lower)
        if step is None:
            return None
        return step.loops(vo, groups, self.nest.loc)

    def try_async_gather(self):
        """A gather the pipeliner issues ahead (annotation async_gather) as cp.async groups
        (transform/partition_parallel/async_gather.py); None keeps the synchronous form."""
        from .async_gather import lower_async_gather

        Lp = self.layout
        if self.ctx.target.sm < 80 or Lp.guard_dims or Lp.replication > 1 or \
                self.analyzer is None or self.iter_map is not None:
            return None
        inner = len(Lp.shape) - 1
        unit = tuple(1 if d == inner else 0 for d in range(len(Lp.shape)))
        vec = 1
        if Lp.value_modes and tuple(Lp.value_modes[0].strides) == unit:
            vec = Lp.value_modes[0].extent
        vo, out = self._per_value_group(vec, lambda body, vo, vi: lower_async_gather(
            self.ctx, body, vo, vi, vec, self.analyzer))
        name = next(iter(collect_stores(self.body)), None)
        if out is None:
            self.ctx.note(f"gather into {name}: no provable cp.async width; synchronous loads")
            return None
        step, w = out
        self.ctx.note(f"gather into {name}: cp.async, {w} elements per copy")
        return ir.For(vo, ir.const(0), ir.const(Lp.num_values // vec), "unroll", step, 1,
                      PARTITIONED, loc=self.nest.loc)

    def _per_value_group(self, vec: int, lower):
        """(vo, lower(body, vo, vi)): the body instantiated for value index v = vo * vec + vi,
        lowered with the analyzer knowing the thread and value ranges."""
        vo, vi = ir.Var("vo"), ir.Var("vi")
        v = ir.binary("add", ir.binary("mul", vo, vec), vi) if vec > 1 else vo
        body = self.instantiate(v)
        with self.analyzer.scope():
            for var, lo, hi in self.ctx.thread_bounds():
                self.analyzer.bind(var, lo, hi - lo)
            self.analyzer.bind(vo, 0, self.layout.num_values // vec)
            self.analyzer.bind(vi, 0, vec)
            return vo, lower(body, vo, vi)

    # ---- instantiation ------------------------------------------------------------------------
    def _iteration(self, tid, v):
        """(loop coordinates, guards) of value `v` of thread `tid` (expressions)."""
        coords = self.layout.coords(tid, v)
        guards = []
        if self.iter_map is not None:
            coords = self.iter_map.iterations(coords, self.grid.extents)
            for x, n in self.iter_map.guard(coords, self.grid.extents) or ():
                guards.append(ir.compare("lt", ir.as_expr(x), n))
                guards.append(ir.compare("ge", ir.as_expr(x), 0))
        return coords, guards

    def loop_coords(self, tid, v) -> dict:
        """The loop variables' values at value `v` of thread `tid`."""
        return {var: ir.as_expr(c) for var, c in zip(self.vars, self._iteration(tid, v)[0])}

    def instantiate(self, v) -> ir.Stmt:
        Lp = self.layout
        tid = self.ctx.tid
        coords, guards = self._iteration(tid, v)
        mapping = {var: ir.as_expr(c) for var, c in zip(self.vars, coords)}
        partitioner = self

        class Rewrite(Mutator):
            def _slot(self, buf, indices):
                fn, per_v, fixed, _, view = partitioner.slot_fns[(buf, tuple(id(i)
                                                                             for i in indices))]
                if isinstance(v, ir.Const):
                    slot = ir.const(int(per_v[v.value]))
                else:
                    slot = fn(v)
                if fixed:  # dims indexed by a value the iteration does not own: registers
                    # (of the access as served: a windowed dim split, fixed its outer part)
                    at = [substitute(self.visit(view.indices[d]), mapping) for d in fixed]
                    slot = ir.binary("add", slot, FA.fixed_offset(view.layout, fixed, at))
                return slot

            def visit_Load(self, e):
                if e.buffer.scope == "local.fragment":
                    reg = partitioner.ctx.register_of(e.buffer)
                    return ir.Load(reg, (self._slot(e.buffer, e.indices),), e.dtype)
                return ir.Load(e.buffer, tuple(substitute(self.visit(i), mapping)
                                               for i in e.indices), e.dtype)

            def visit_Store(self, s):
                value = substitute(self.visit(s.value), mapping)
                if s.buffer.scope == "local.fragment":
                    reg = partitioner.ctx.register_of(s.buffer)
                    return ir.Store(reg, (self._slot(s.buffer, s.indices),), value, loc=s.loc)
                return ir.Store(s.buffer, tuple(substitute(self.visit(i), mapping)
                                                for i in s.indices), value, loc=s.loc)

            def visit_Var(self, var):
                return mapping.get(var, var)

        body = contribute_once(Rewrite().visit(self.body), Lp.is_representative(tid))
        if self.owner is not None:
            if not self.active[:, v.value].any():
                return ir.Seq(())
            return self._owner_guard(body, v.value)
        if Lp.replication > 1:
            registers = set(self.ctx.registers.values())
            body = _one_writer(body, Lp.is_representative(tid), registers)
        guard = Lp.guard(tid, v)
        if guard is not None:
            guards.insert(0, ir.as_expr(guard))
        cond = all_of(guards)
        if cond is not None:
            body = ir.If(ir.as_expr(cond), body, None, loc=self.nest.loc)
        return body

    def grid_stride(self) -> ir.Stmt:
        """A nest with symbolic extents: each thread walks the flattened space in steps of the
        block size."""
        T = self.ctx.num_threads
        total = ir.const(1)
        for e in self.extents:
            total = ir.binary("mul", total, e)
        k = ir.Var("k")
        flat = ir.binary("add", ir.binary("mul", k, T), self.ctx.tid)
        mapping, rest = {}, flat
        for var, e in reversed(list(zip(self.vars, self.extents))):
            mapping[var] = ir.binary("floormod", rest, e)
            rest = ir.binary("floordiv", rest, e)
        body = substitute(self.body, mapping)
        body = ir.If(ir.compare("lt", flat, total), body, None, loc=self.nest.loc)
        trips = ir.binary("floordiv", ir.binary("add", total, T - 1), T)
        return ir.For(k, ir.const(0), trips, "serial", body, 1, PARTITIONED, loc=self.nest.loc)


def collect_stores(body):
    """Names of the buffers a statement stores into."""
    from ...ir.visitor import any_node, collect

    return [n.buffer.name for n in collect(body, lambda n: isinstance(n, ir.Store))]


def _one_writer(body, representative, registers=()):
    """In a replicated loop layout several threads run each iteration: they all update their
    register copies, but only one of them may write memory or do an atomic; barriers
    (`T.sync_grid` in the body) are reached by every copy. When the body updates no fragment
    registers and has no barrier, the other copies skip it entirely (no duplicate reads of
    memory the representative is writing)."""
    if representative is None:
        return body
    cond = ir.as_expr(representative)
    from ...ir.visitor import any_node

    if not any_node(body, lambda n: (isinstance(n, ir.Store) and n.buffer in registers)
                   or ir.is_collective_sync(n)):
        return ir.If(cond, body, None)

    class Guard(Mutator):
        def visit_Store(self, s):
            if s.buffer.scope in ("local", "local.var"):
                return s
            return ir.If(cond, s, None, loc=s.loc)

        def visit_Evaluate(self, s):
            c = s.value
            if ir.is_collective_sync(c):  # every copy reaches a barrier, the same times
                return s
            if isinstance(c, ir.Call) and (c.op.startswith("atomic_") or ir.is_extern_call(c)):
                return ir.If(cond, s, None, loc=s.loc)
            return s

    return Guard().visit(body)


class _Partition(InRoleGroups, ScopedMutator):
    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx

    def visit_For(self, s):
        if s.kind == "parallel":
            return _split_at_barriers(NestPartitioner(self.ctx, s, self.analyzer).run())
        if s.kind == "vectorized" and not self.ctx.flag(PassConfigKey.TIR_DISABLE_VECTORIZE):
            from .vectorize import hoist_lane_assumptions, vectorize_explicit_loop

            hoisted = hoist_lane_assumptions(s)
            if hoisted is not s:
                with self.assuming(hoisted.value):
                    self.analyzer.assume(hoisted.value)
                    vectorized = vectorize_explicit_loop(self.ctx, hoisted.body, self.analyzer)
                if vectorized is not None:
                    return ir.with_fields(hoisted, body=vectorized)
                # lane by lane, each with its own assumption
            vectorized = vectorize_explicit_loop(self.ctx, s, self.analyzer)
            if vectorized is not None:
                return vectorized
        if s.kind == "serial" and not self.ctx.flag(PassConfigKey.TIR_DISABLE_VECTORIZE):
            from .vectorize import vectorize_serial_loop

            vectorized = vectorize_serial_loop(self.ctx, s, self.analyzer)
            if vectorized is not None:
                return vectorized
        return super().visit_For(s)


def _split_at_barriers(stmt):
    """A barrier in a T.Parallel body (`T.sync_grid()` between reading and updating) orders
    every iteration's statements before it ahead of every iteration's statements after it.
    A thread running several iterations in a loop would interleave them (iteration 1's update
    before iteration 2's read), so such a loop becomes one loop per part with the barrier once
    between them. Left alone when a let the parts share reads memory (it would be re-read
    after the barrier)."""
    class Split(Mutator):
        def visit_For(self, f):
            f = self.generic(f)
            items = flatten(f.body)
            if not any(isinstance(it, ir.Evaluate) and ir.is_collective_sync(it.value)
                       for it in items):
                return f
            if any(isinstance(it, tuple) and buffers_read(it.value) for it in items):
                return f
            out, lets, part = [], [], []
            for it in items + [None]:
                if it is None or (isinstance(it, ir.Evaluate) and
                                  ir.is_collective_sync(it.value)):
                    if any(not isinstance(x, tuple) for x in part):
                        out.append(ir.with_fields(f, body=rebuild(lets + part)))
                    if it is not None:
                        out.append(it)
                    lets = lets + [x for x in part if isinstance(x, tuple)]
                    part = []
                else:
                    part.append(it)
            return ir.Seq(tuple(out))

    return Split().visit(stmt)


class _BlockLevelFragments(InRoleGroups, Mutator):
    """Fragment accesses outside parallel loops. Every thread runs a block-level statement,
    but an element of a fragment lives only in its holders' registers: an element all threads
    hold (a replicated fragment) is read and written in place; otherwise only the holders
    store it, and a read is broadcast from its representative holder through a one-element
    shared scratch (barriers come from insert_sync)."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.pre = None  # statements the current statement needs first (broadcasts)
        self.loc = None

    def _slot(self, buf, indices, loc):
        P = self.ctx.layouts[buf]
        try:
            holder, slot = P.locate(*indices)
        except ValueError as e:
            _err(loc, f"fragment {buf.name} accessed outside T.Parallel: {e}")
        return ir.as_expr(holder), ir.as_expr(slot)

    def _held_by_all(self, buf, indices) -> bool:
        P = self.ctx.layouts[buf]
        T = self.ctx.num_threads
        if P.num_threads == T and P.replication == T:
            return True
        consts = [i.value if isinstance(i, ir.Const) else None for i in indices]
        if None in consts or P.num_threads != T:
            return False
        slot = P._holder_table()[(1,) + tuple(consts)]
        back = P.coords(np.arange(T), int(slot))
        return all(np.all(np.asarray(b) == c) for b, c in zip(back, consts))

    def _holds(self, buf, indices, slot):
        """Condition: the executing thread holds buf[indices] (at `slot`)."""
        P = self.ctx.layouts[buf]
        tid = self.ctx.tid
        conds = [ir.compare("eq", ir.as_expr(c), ir.as_expr(i))
                 for c, i in zip(P.coords(tid, slot), indices)]
        return ir.as_expr(all_of(conds)) if conds else ir.const(True)

    def visit_Load(self, e):
        if e.buffer.scope != "local.fragment":
            return self.generic(e)
        indices = tuple(self.visit(i) for i in e.indices)
        holder, slot = self._slot(e.buffer, indices, self.loc)
        reg = self.ctx.register_of(e.buffer)
        if self._held_by_all(e.buffer, indices):
            return ir.Load(reg, (slot,), e.dtype)
        if self.pre is None:
            _err(self.loc, f"fragment {e.buffer.name} is read outside T.Parallel where not "
                           "every thread holds the element (a while-loop condition); copy it "
                           "into a T.alloc_var first")
        scratch = self.ctx.add_scratch_shared(f"{e.buffer.name}_bcast", (1,), e.dtype)
        self.pre.append(ir.If(ir.compare("eq", self.ctx.tid, holder),
                              ir.Store(scratch, (ir.const(0),), ir.Load(reg, (slot,), e.dtype),
                                       loc=self.loc), None, loc=self.loc))
        self.ctx.note(f"{e.buffer.name}: a block-level read of an element one thread holds is "
                      "broadcast through shared memory")
        return ir.Load(scratch, (ir.const(0),), e.dtype)

    def _exprs(self, s, make):
        """`make()` (the statement's own expressions) with broadcasts collected: (result,
        statements to run first)."""
        outer, self.pre, self.loc = (self.pre, self.loc), [], s.loc or self.loc
        try:
            out = make()
            pre = tuple(self.pre)
        finally:
            self.pre, self.loc = outer
        return out, pre

    @staticmethod
    def _seq(pre, stmt):
        return ir.Seq(pre + (stmt,)) if pre else stmt

    def visit_Store(self, s):
        def make():
            value = self.visit(s.value)
            indices = tuple(self.visit(i) for i in s.indices)
            if s.buffer.scope != "local.fragment":
                return ir.Store(s.buffer, indices, value, loc=s.loc)
            _, slot = self._slot(s.buffer, indices, s.loc)
            store = ir.Store(self.ctx.register_of(s.buffer), (slot,), value, loc=s.loc)
            if self._held_by_all(s.buffer, indices):
                return store
            return ir.If(self._holds(s.buffer, indices, slot), store, None, loc=s.loc)
        return self._seq(*reversed(self._exprs(s, make)))

    def visit_Evaluate(self, s):
        return self._seq(*reversed(self._exprs(s, lambda: self.generic(s))))

    def visit_Assert(self, s):
        return self._seq(*reversed(self._exprs(s, lambda: self.generic(s))))

    def visit_If(self, s):
        cond, pre = self._exprs(s, lambda: self.visit(s.cond))
        else_body = None if s.else_body is None else self.visit(s.else_body)
        return self._seq(pre, ir.If(cond, self.visit(s.then_body), else_body, loc=s.loc))

    def visit_LetStmt(self, s):
        value, pre = self._exprs(s, lambda: self.visit(s.value))
        return self._seq(pre, ir.LetStmt(s.var, value, self.visit(s.body), loc=s.loc))

    def visit_For(self, s):
        (start, extent), pre = self._exprs(s, lambda: (self.visit(s.start),
                                                        self.visit(s.extent)))
        return self._seq(pre, ir.with_fields(s, start=start, extent=extent,
                                             body=self.visit(s.body)))

    def visit_While(self, s):
        self.loc = s.loc or self.loc
        return self.generic(s)


def partition_parallel_loops(kernel, ctx):
    kernel = _Partition(ctx).visit(kernel)
    return _BlockLevelFragments(ctx).visit(kernel)


_ = L
