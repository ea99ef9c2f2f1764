"""Statement execution: compiles a `PrimFunc` body once into closures `fn(ctx, mask) -> mask`
and runs it.

A statement closure receives the mask of active lanes (`lanes.py`) and returns the lanes that
continue normally after it: `break` and `continue` remove lanes (a `break` also records them in
the innermost loop's break mask, so the loop drops them for its remaining iterations), `if` on
a lane-dependent condition runs both branches under complementary masks and merges what comes
out. With uniform conditions everything stays scalar and no masks are built.

Execution model (SEMANTICS §0): kernels run in order; the blocks of a grid one after another,
blockIdx.x fastest; block-level statements run in the thread space (one lane per thread);
`T.Parallel` nests run in a parallel space (one lane per iteration); serial, unrolled,
vectorised and pipelined loops are Python loops; tile ops run once per block (`tileops.py`).
Fresh shared, fragment and `T.alloc_local` memory is poisoned (`numerics.poison_value`).
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import nodes as ir
from ..ir.thread_range import interval, role_of, thread_set, warp_aligned
from ..ir.visitor import any_node, substitute
from .evaluate import ExprCompiler
from .address import array_at_address
from .intrinsics import CLUSTER_SYNC_CALLS, compile_call
from .lanes import EMPTY, Ctx, LaneSpace, collapse, fail, mask_and, mask_andnot, mask_or
from .memory import LocalStore, store_array
from .numerics import NARROW_FLOATS, const_value, poison_value
from .printing import compile_print
from .roles import Barriers, Role, collective_ok, run_clusters, run_concurrently, run_grid
from .tileops import compile_tile_op, rank_in_cluster, uniform_int, uniform_value

__all__ = ["Program"]

_TILE_OPS = (ir.Copy, ir.Fill, ir.Gemm, ir.Reduce, ir.CumSum, ir.AtomicTile, ir.TmaCopy)
_SERIAL_KINDS = ("serial", "unroll", "vectorized", "pipelined")


def _passthrough(ctx, mask):
    return mask


class Program(ExprCompiler):
    """A compiled PrimFunc: `run(bufs, env)` executes it on numpy storage."""

    def __init__(self, func: ir.PrimFunc):
        super().__init__()
        self.func = func
        self._spaces: dict = {}
        self._aranges: dict = {}
        self._thread = None  # (thread var, thread count) of the kernel being compiled (1-D)
        self._index_lets: dict = {}  # let var -> its index arithmetic (no memory reads)
        self.statement_loc = None  # the location of the call statement being compiled
        self.body = self.stmt(func.body)

    # ---- entry -------------------------------------------------------------------------------
    def run(self, bufs: dict, env: dict):
        host = LaneSpace("host", (1,))
        ctx = Ctx(env, bufs, host, self.func.name)
        with np.errstate(all="ignore"):
            self.body(ctx, None)

    def stmt(self, s):
        method = getattr(self, "_s_" + type(s).__name__, None)
        if method is None:
            if isinstance(s, _TILE_OPS):
                return compile_tile_op(self, s)
            raise NotImplementedError(f"the CPU interpreter cannot execute "
                                      f"{type(s).__name__} statements")
        return method(s)

    # ---- structure ---------------------------------------------------------------------------
    def _flatten(self, s):
        """Closures of a statement list, with let bindings and allocations lifted out of the
        nesting the builder gives them (`let x = v in (rest...)`): Vars and buffers are unique
        objects, so binding in sequence is equivalent, and long unrolled bodies with hundreds
        of lets do not recurse hundreds of levels deep. Consecutive roles that wait on
        mbarriers become one closure running them side by side (roles.py)."""
        out, stack = [], [s]
        while stack:
            node = stack.pop()
            if isinstance(node, ir.Seq):
                stack.extend(reversed(node.stmts))
            elif isinstance(node, ir.LetStmt):
                out.append(self._let(node))
                if not any_node(node.value, lambda n: isinstance(n, (ir.Load, ir.Call))):
                    # `tid = T.get_thread_binding()`: branches on tid are thread ranges too
                    self._index_lets[node.var] = substitute(node.value, self._index_lets)
                stack.append(node.body)
            elif isinstance(node, ir.Allocate):
                out.append(self._allocate(node))
                stack.append(node.body)
            elif self._role_parts(node) is not None:
                run = [node]
                while stack and not isinstance(stack[-1], (ir.Seq, ir.LetStmt, ir.Allocate)) \
                        and self._role_parts(stack[-1]) is not None:
                    run.append(stack.pop())
                out.extend(self._roles(run))
            else:
                out.append(self.stmt(node))
        return out

    # ---- roles (T.ws, thread-range branches) -------------------------------------------------
    def _role_parts(self, s):
        """[(condition, body, (lo, hi))] of a role statement (roles.py), else None."""
        if self._thread is None:
            return None
        tvar, n = self._thread
        if self._index_lets and isinstance(s, (ir.Attr, ir.If)):
            s = _with_cond(s, self._index_lets)
        role = role_of(s, tvar, n) if isinstance(s, ir.Attr) else None
        if role is not None and warp_aligned(role[0]):
            return [(s.body.cond, role[1], role[0])]
        if isinstance(s, ir.If):
            return self._chain_parts(s, np.ones(n, dtype=bool), None)
        return None

    def _chain_parts(self, s, reaching, reach_cond):
        """The role parts of `if c1: .. elif c2: .. else: ..` on the thread index, reached by
        the threads `reaching` (a bool array; `reach_cond` their condition, None: all): one
        part per branch, so that the branches of a chain run side by side as siblings (the
        reference's `if tx < 128: .. elif tx < 256: .. else: ..`)."""
        tvar, n = self._thread
        truth = thread_set(s.cond, tvar, n)
        if truth is None:
            return None
        then = interval(truth & reaching)
        if not warp_aligned(then):
            return None

        def both(c):
            return c if reach_cond is None else ir.logical_and(reach_cond, c)
        parts = [(both(s.cond), s.then_body, then)]
        if s.else_body is None:
            return parts
        rest, rest_cond = reaching & ~truth, both(ir.logical_not(s.cond))
        inner = s.else_body
        while isinstance(inner, ir.Seq) and len(inner.stmts) == 1:
            inner = inner.stmts[0]
        if isinstance(inner, ir.If):
            if self._index_lets:
                inner = _with_cond(inner, self._index_lets)
            chain = self._chain_parts(inner, rest, rest_cond)
            if chain is not None:
                return parts + chain
        other = interval(rest)
        if not warp_aligned(other):  # never taken, or not one range of whole warps
            return None
        return parts + [(rest_cond, s.else_body, other)]

    def _roles(self, run):
        """Closures of a run of consecutive role statements: side by side when they wait on
        mbarriers (and are more than one role), else one after the other."""
        parts = [p for s in run for p in self._role_parts(s)]
        if len(parts) < 2 or not any(self._waits(s) for s in run):
            return [self._role_statement(s) for s in run]
        compiled = [(self.as_type(c, ir.BOOL), self.stmt(b), rng) for c, b, rng in parts]
        loc = run[0].loc

        def f(ctx, mask):
            ctx.mask = mask
            ctx.loc = loc
            return run_concurrently(ctx, mask, compiled)
        return [f]

    @staticmethod
    def _waits(s) -> bool:
        return any_node(s, lambda n: isinstance(n, ir.Call) and n.op == "call_extern"
                        and n.args[0] == "tl::mbarrier_wait")

    def _role_statement(self, s):
        """One role statement run on its own (its branches one after the other)."""
        parts = self._role_parts(s)
        branches = [self._role_branch(c, b, rng, s.loc) for c, b, rng in parts]
        if len(branches) == 1:
            return branches[0]

        def roles(ctx, mask):
            for branch in branches:
                mask = branch(ctx, mask)
            return mask
        return roles

    def _role_branch(self, cond, body, rng, loc):
        """A role run on its own: the threads where `cond` holds run `body` as the role."""
        fc, fb = self.as_type(cond, ir.BOOL), self.stmt(body)
        lo, hi = rng

        def f(ctx, mask):
            ctx.mask = mask
            ctx.loc = loc
            m = mask_and(mask, fc(ctx))
            if m is EMPTY:
                return mask
            saved = ctx.role
            ctx.role = Role(lo, hi, m)
            try:
                out = fb(ctx, m)
            finally:
                ctx.role = saved
            return mask_or(mask_andnot(mask, m) if m is not None else EMPTY, out)
        return f

    def _s_Attr(self, s):
        if s.key == "tensor_address":
            return self._tensor_address(s)
        if s.key == "assume":
            return self._assume(s)
        if s.key == "reducer_finalize":
            # reducers are shared buffers updated atomically here: whole at every moment
            return self.stmt(s.body)
        if self._role_parts(s) is None:
            return self.stmt(s.body)
        return self._role_statement(s)

    def _assume(self, s):
        """T.assume: a promise the compiler relies on; the interpreter checks it (on the GPU a
        false one is undefined behaviour)."""
        fc = self.as_type(s.value, ir.BOOL)
        body, loc = self.stmt(s.body), s.loc

        def f(ctx, mask):
            ctx.mask, ctx.loc = mask, loc
            if _fails_somewhere(fc(ctx), mask):
                raise fail(ctx, ValueError, f"T.assume({s.value}) does not hold here: the "
                                            "compiler relies on it (on the GPU a false "
                                            "assumption is undefined behaviour)")
            return body(ctx, mask)
        return f

    def _s_Seq(self, s):
        fns = self._flatten(s)
        if not fns:
            return _passthrough
        if len(fns) == 1:
            return fns[0]

        def f(ctx, mask):
            for fn in fns:
                mask = fn(ctx, mask)
                if mask is EMPTY:
                    return EMPTY
            return mask
        return f

    def _s_Evaluate(self, s):
        e = s.value
        if isinstance(e, ir.Call):
            # calls compiled as statements of their own (interp/wide_access.py) report here
            self.statement_loc = s.loc
            fn = compile_call(self, e, want_value=False)
        else:
            fn = self.expr(e)
        loc = s.loc

        def f(ctx, mask):
            ctx.mask = mask
            ctx.loc = loc
            fn(ctx)
            return mask
        return f

    def _s_Store(self, s):
        update = _conditional_update(s)
        if update is not None:
            return self._s_If(update)
        buf = s.buffer
        fidx = [self.expr(i) for i in s.indices]
        fval = self.as_type(s.value, buf.dtype)
        is_global = buf.scope == "global"
        loc = s.loc

        def f(ctx, mask):
            ctx.mask = mask
            ctx.loc = loc
            try:
                st = ctx.bufs[buf]
            except KeyError:
                raise fail(ctx, NameError, f"buffer {buf.name} is not allocated here") from None
            idx = tuple([fi(ctx) for fi in fidx])
            val = fval(ctx)
            if isinstance(st, LocalStore):
                st.store(ctx, idx, val, mask)
            else:
                store_array(ctx, st, buf, idx, val, mask, is_global)
            return mask
        return f

    _s_LetStmt = _s_Seq
    _s_Allocate = _s_Seq

    def _tensor_address(self, s):
        # T.make_tensor(address, ...): bind the buffer to the memory at the address
        buf, addr = s.value
        faddr = self.expr(addr)
        fshape = [d if isinstance(d, int) else self.expr(d) for d in buf.shape]
        body, loc = self.stmt(s.body), s.loc

        def f(ctx, mask):
            ctx.mask, ctx.loc = mask, loc
            address = uniform_int(ctx, faddr(ctx), f"the address of {buf.name}")
            shape = tuple(d if isinstance(d, int) else
                          uniform_int(ctx, d(ctx), f"{buf.name} shape") for d in fshape)
            ctx.bufs[buf] = array_at_address(ctx, buf, address, shape)
            return body(ctx, mask)
        return f

    def _let(self, s):
        """Binds the let's Var (its body is compiled by `_flatten`)."""
        var, fv, loc = s.var, self.expr(s.value), s.loc

        def f(ctx, mask):
            ctx.mask = mask
            ctx.loc = loc
            ctx.env[var] = fv(ctx)
            return mask
        return f

    def _allocate(self, s):
        """Creates the thread-private storage (its body is compiled by `_flatten`)."""
        buf, loc = s.buffer, s.loc
        npdt = buf.dtype.numpy
        shape = tuple(buf.shape)
        static = all(isinstance(d, int) for d in shape)
        fshape = None if static else [self.expr(d) if not isinstance(d, int) else d
                                      for d in shape]
        finit = self.as_type(s.init, buf.dtype) if s.init is not None else None
        poison = poison_value(buf.dtype)

        def f(ctx, mask):
            ctx.mask = mask
            ctx.loc = loc
            shp = shape if static else tuple(
                d if isinstance(d, int) else uniform_int(ctx, d(ctx), f"{buf.name} shape")
                for d in fshape)
            if finit is None:
                ctx.bufs[buf] = LocalStore(buf, ctx.space, np.full(shp, poison, npdt))
            else:
                v = finit(ctx)
                if type(v) is np.ndarray and v.ndim:
                    st = LocalStore(buf, ctx.space, np.full(shp, poison, npdt))
                    st.store(ctx, (np.int32(0),) * len(shp), v, None)
                else:
                    st = LocalStore(buf, ctx.space, np.full(shp, v, npdt))
                ctx.bufs[buf] = st
            return mask
        return f

    # ---- control flow --------------------------------------------------------------------------
    def _s_If(self, s):
        if self._role_parts(s) is not None:
            return self._roles([s])[0]  # then and else side by side if they wait
        fc = self.as_type(s.cond, ir.BOOL)
        ft = self.stmt(s.then_body)
        fe = self.stmt(s.else_body) if s.else_body is not None else None
        loc = s.loc

        def f(ctx, mask):
            ctx.mask = mask
            ctx.loc = loc
            c = fc(ctx)
            if type(c) is not np.ndarray or c.ndim == 0:
                if c:
                    return ft(ctx, mask)
                return fe(ctx, mask) if fe is not None else mask
            tm, em = mask_and(mask, c), mask_andnot(mask, c)
            out_t = ft(ctx, tm) if tm is not EMPTY else EMPTY
            if em is EMPTY:
                out_e = EMPTY
            else:
                out_e = fe(ctx, em) if fe is not None else em
            return mask_or(out_t, out_e)
        return f

    def _s_Break(self, s):
        def f(ctx, mask):
            ctx.brk[-1] = mask_or(ctx.brk[-1], mask)
            return EMPTY
        return f

    def _s_Continue(self, s):
        return lambda ctx, mask: EMPTY

    @staticmethod
    def _after_iteration(ctx, m):
        """Drop the lanes that broke out during this iteration."""
        b = ctx.brk[-1]
        if b is EMPTY:
            return m
        ctx.brk[-1] = EMPTY
        return EMPTY if b is None else mask_andnot(m, b)

    def _s_For(self, s):
        if s.kind == "parallel":
            return self._parallel(s)
        if s.kind not in _SERIAL_KINDS:
            raise NotImplementedError(f"the CPU interpreter has no `{s.kind}` loops")
        var, step, loc = s.var, int(s.step), s.loc
        fstart, fext = self.expr(s.start), self.expr(s.extent)
        body = self.stmt(s.body)
        vtype = var.dtype.numpy.type

        def f(ctx, mask):
            ctx.mask = mask
            ctx.loc = loc
            start, ext = fstart(ctx), fext(ctx)
            env = ctx.env
            ctx.brk.append(EMPTY)
            m = mask
            try:
                if type(ext) is not np.ndarray and type(start) is not np.ndarray:
                    start = int(start)
                    for k in range(int(ext)):
                        env[var] = vtype(start + k * step)
                        body(ctx, m)
                        m = self._after_iteration(ctx, m)
                        if m is EMPTY:
                            break
                    return mask
                # lane-dependent trip count: run to the longest, masking finished lanes
                ext_a = np.asarray(ext)
                live = ext_a if mask is None else np.where(mask, ext_a, 0)
                n = int(np.max(live)) if np.size(live) else 0
                for k in range(n):
                    mk = mask_and(m, ext_a > k)
                    if mk is EMPTY:
                        break
                    env[var] = (start + k * step).astype(var.dtype.numpy) if type(
                        start) is np.ndarray else vtype(int(start) + k * step)
                    body(ctx, mk)
                    m = self._after_iteration(ctx, m)
                    if m is EMPTY:
                        break
                return mask
            finally:
                ctx.brk.pop()
        return f

    def _s_While(self, s):
        fc = self.as_type(s.cond, ir.BOOL)
        body, loc = self.stmt(s.body), s.loc

        def f(ctx, mask):
            ctx.brk.append(EMPTY)
            m = mask
            try:
                while True:
                    ctx.mask = m
                    ctx.loc = loc
                    m = mask_and(m, fc(ctx))
                    if m is EMPTY:
                        break
                    body(ctx, m)
                    m = self._after_iteration(ctx, m)
                    if m is EMPTY:
                        break
            finally:
                ctx.brk.pop()
            return mask
        return f

    def _s_Assert(self, s):
        fc = self.as_type(s.cond, ir.BOOL)
        loc, text = s.loc, s.message or f"device assertion failed: {s.cond}"

        def f(ctx, mask):
            ctx.mask = mask
            ctx.loc = loc
            if _fails_somewhere(fc(ctx), mask):
                raise fail(ctx, AssertionError, text)
            return mask
        return f

    def _s_Print(self, s):
        return compile_print(self, s)

    # ---- T.Parallel ----------------------------------------------------------------------------
    def _space(self, shape):
        sp = self._spaces.get(shape)
        if sp is None:
            sp = self._spaces[shape] = LaneSpace("parallel", shape)
        return sp

    def _loop_values(self, var, start, step, n, d, nd):
        key = (var.dtype, start, step, n, d, nd)
        v = self._aranges.get(key)
        if v is None:
            v = (start + step * np.arange(n)).astype(var.dtype.numpy)
            v = v.reshape((1,) * d + (n,) + (1,) * (nd - d - 1))
            v.setflags(write=False)
            self._aranges[key] = v
        return v

    def _parallel(self, s):
        loops = [s]
        while isinstance(loops[-1].body, ir.For) and loops[-1].body.kind == "parallel":
            loops.append(loops[-1].body)
        vars_ = [lp.var for lp in loops]
        fstarts = [self.expr(lp.start) for lp in loops]
        fexts = [self.expr(lp.extent) for lp in loops]
        steps = [int(lp.step) for lp in loops]
        body, loc = self.stmt(loops[-1].body), s.loc
        nd = len(loops)

        def f(ctx, mask):
            ctx.mask = mask
            ctx.loc = loc
            if not collective_ok(ctx, mask):
                raise fail(ctx, NotImplementedError,
                           "T.Parallel reached under a thread-dependent condition (only some "
                           "threads take part); the CPU interpreter cannot run it")
            exts = [uniform_int(ctx, fe(ctx), "T.Parallel extent") for fe in fexts]
            if min(exts) <= 0:
                return mask
            starts = [uniform_int(ctx, fs(ctx), "T.Parallel start") for fs in fstarts]
            outer_env, outer_space = ctx.env, ctx.space
            env = {}
            for k, v in outer_env.items():
                env[k] = collapse(v) if type(v) is np.ndarray and v.ndim else v
            for d, var in enumerate(vars_):
                env[var] = self._loop_values(var, starts[d], steps[d], exts[d], d, nd)
            ctx.env, ctx.space = env, self._space(tuple(exts))
            ctx.brk.append(EMPTY)
            try:
                body(ctx, None)
            finally:
                for st in ctx.bufs.values():
                    if type(st) is LocalStore and (st.private or st.read_in):
                        st.end_parallel(ctx.space)
                ctx.env, ctx.space = outer_env, outer_space
                ctx.brk.pop()
                ctx.mask = mask
            return mask
        return f

    # ---- kernel launch -------------------------------------------------------------------------
    def _s_Kernel(self, s):
        fgrid = [g if isinstance(g, int) else self.expr(g) for g in s.grid]
        saved = self._thread
        self._thread = (s.thread_vars[0], s.threads[0]) if len(s.threads) == 1 else None
        try:
            body, loc = self.stmt(s.body), s.loc
        finally:
            self._thread = saved
        threads = tuple(s.threads) + (1,) * (3 - len(s.threads))
        n = math.prod(threads)
        tid = np.arange(n)
        ids = ((tid % threads[0]).astype(np.int32),
               ((tid // threads[0]) % threads[1]).astype(np.int32),
               (tid // (threads[0] * threads[1])).astype(np.int32))
        for a in ids:
            a.setflags(write=False)
        space = LaneSpace("thread", (n,))
        allocs = [(b, tuple(b.shape), b.dtype.numpy, poison_value(b.dtype)) for b in s.allocs]
        fsafe = [(v[0], self.as_type(v[1], v[0].dtype)) for k, v in s.attrs
                 if k == "safe_value"]
        bvars, tvars = s.block_vars, s.thread_vars
        btypes = [v.dtype.numpy.type for v in bvars]
        cluster = next((tuple(v) for k, v in s.attrs if k == "cluster_dims"), (1, 1, 1))
        views = [(v, [d if isinstance(d, int) else self.expr(d) for d in v.shape])
                 for k, v in s.attrs if k == "buffer_view"]
        barrier_inits = [v for k, v in s.attrs if k == "barrier_init"]
        local_views = [v for k, v in s.attrs if k == "local_view"]
        grid_sync = any_node(s.body, lambda n: isinstance(n, ir.Call) and n.op == "call_extern"
                             and n.args[0] == ir.GRID_SYNC)
        # blocks that wait for their cluster's peers run side by side, cluster by cluster
        cluster_waits = cluster != (1, 1, 1) and any_node(
            s.body, lambda n: isinstance(n, ir.Call) and n.op == "call_extern"
            and isinstance(n.args[0], str) and n.args[0].startswith(CLUSTER_SYNC_CALLS)
            or isinstance(n, ir.TmaCopy) and n.cluster_mask is not None)
        if grid_sync and cluster_waits:
            raise NotImplementedError("the CPU interpreter runs T.sync_grid or cluster barriers "
                                      "in a kernel, not both")

        def f(hctx, mask):
            hctx.mask = mask
            hctx.loc = loc
            grid = [g if isinstance(g, int) else uniform_int(hctx, g(hctx), "grid extent")
                    for g in fgrid]
            grid = grid + [1] * (3 - len(grid))
            problem = ir.launch_limit_problem(grid)
            if problem:  # the GPU could not launch it: neither does the interpreter
                raise fail(hctx, ValueError, f"cannot launch this kernel: its {problem}")
            base_env = dict(hctx.env)
            for v, a in zip(tvars, ids):
                base_env[v] = a
            ctx = Ctx(None, None, space, hctx.func_name)
            ctx.threads, ctx.nthreads, ctx.thread_ids = threads, n, ids
            ctx.cluster = cluster
            ctx.safe = {b: const_value(uniform_value(hctx, fv(hctx), "safe value"), b.dtype)
                        for b, fv in fsafe}
            gx, gy, gz = grid
            if views:  # bound once: the views alias the tensors' storage (no copies)
                hctx.bufs = dict(hctx.bufs)
                for view, fshape in views:
                    hctx.bufs[view] = _view_array(hctx, view, fshape)
            def start_block(ctx, bx, by, bz):
                env = dict(base_env)
                for v, t, b in zip(bvars, btypes, (bx, by, bz)):
                    env[v] = t(b)
                bufs = dict(hctx.bufs)
                for b, shp, npdt, poison in allocs:
                    bufs[b] = np.full(shp, poison, npdt)
                for v in local_views:  # the same storage as their shared tile / fragment
                    bufs[v] = _reinterpret(hctx, v, bufs[v.view_of].reshape(-1), v.shape)
                ctx.env, ctx.bufs, ctx.block = env, bufs, (bx, by, bz)
                ctx.mask, ctx.space, ctx.brk, ctx.loc = None, space, [], loc
                ctx.barriers = Barriers(barrier_inits)

            blocks = [(bx, by, bz) for bz in range(gz) for by in range(gy) for bx in range(gx)]
            if grid_sync:
                run_grid(ctx, blocks, start_block, body)
                return mask
            if cluster_waits:
                run_clusters(ctx, _clusters(blocks, cluster), start_block, body)
                return mask
            for bx, by, bz in blocks:
                start_block(ctx, bx, by, bz)
                body(ctx, None)
            return mask
        return f


def _clusters(blocks, dims):
    """The blocks grouped by cluster (consecutive blocks along each dimension), each as
    (rank in the cluster, block), clusters in launch order."""
    groups: dict = {}
    for block in blocks:
        key = tuple(b // c for b, c in zip(block, dims))
        groups.setdefault(key, []).append((rank_in_cluster(block, dims), block))
    return list(groups.values())


def _with_cond(s, lets):
    """`s` (a T.ws Attr or an If) with the let variables of its condition substituted."""
    if isinstance(s, ir.Attr):
        inner = s.body
        if not isinstance(inner, ir.If):
            return s
        return ir.Attr(s.key, s.value, _with_cond(inner, lets), loc=s.loc)
    cond = substitute(s.cond, lets)
    return s if cond is s.cond else ir.If(cond, s.then_body, s.else_body, loc=s.loc)


def _view_array(ctx, view, fshape):
    """The storage of `view` (T.Tensor(shape, dtype, X.data)): X's array re-shaped without a
    copy, so writes through either name reach the same elements."""
    try:
        arr = ctx.bufs[view.view_of]
    except KeyError:
        raise fail(ctx, NameError, f"view {view.name}: buffer {view.view_of.name} is not "
                                   "allocated here") from None
    shape = tuple(d if isinstance(d, int) else uniform_int(ctx, d(ctx), "view extent")
                  for d in fshape)
    flat = arr.reshape(-1)
    if not np.shares_memory(flat, arr):
        raise fail(ctx, ValueError, f"view {view.name}: {view.view_of.name} is not "
                                    "contiguous, so it cannot be re-viewed")
    return _reinterpret(ctx, view, flat, shape)


def _reinterpret(ctx, view, flat, shape):
    """`flat` (the root's storage, one dimension) as `view`'s elements at `shape`."""
    root = view.view_of
    if view.dtype != root.dtype:
        narrow = [d.name for d in (root.dtype, view.dtype) if d.name in NARROW_FLOATS]
        if narrow:
            raise fail(ctx, NotImplementedError,
                       f"view {view.name} reinterprets the bytes of {root.dtype} {root.name} as "
                       f"{view.dtype}; the interpreter stores {narrow[0]} in wider floats, so "
                       "only the GPU can")
        flat = flat.view(view.dtype.numpy)
    n = math.prod(shape)
    if n > flat.size:
        raise fail(ctx, ValueError, f"view {view.name} has {n} elements but {root.name} holds "
                                    f"only {flat.size}")
    return flat[:n].reshape(shape)


# ---- conditional updates ----------------------------------------------------------------------

def _conditional_update(s: ir.Store):
    """`x[i] = T.if_then_else(c, v, x[i])` as `if c: x[i] = v`, or None for other stores.

    Where c is false the store writes back the value it read, which changes nothing; the
    reference's sparse compressor relies on that with an index i past the end of x on those
    lanes (`nz_idx[nz_count]` once a group's two slots are full), which a GPU executes
    harmlessly but the interpreter's bounds checks would reject."""
    value = _strip_exact_casts(s.value, s.buffer.dtype)
    if not isinstance(value, ir.Select):
        return None
    back = _strip_exact_casts(value.false_value, s.buffer.dtype)
    if not (isinstance(back, ir.Load) and back.buffer is s.buffer
            and len(back.indices) == len(s.indices)
            and all(ir.structural_equal(a, b) for a, b in zip(back.indices, s.indices))):
        return None
    return ir.If(value.cond, ir.Store(s.buffer, s.indices, value.true_value, loc=s.loc),
                 loc=s.loc)


def _strip_exact_casts(e, dtype):
    """`e` without the casts that hold every value of `dtype` exactly (int widenings), so a
    value of `dtype` taken through them and cast back to `dtype` is unchanged."""
    while isinstance(e, ir.Cast) and _holds_all(dtype, e.dtype):
        e = e.value
    return e


def _holds_all(inner, outer) -> bool:
    if inner == outer:
        return True
    if not (inner.is_int and outer.is_int) or inner.lanes != 1 or outer.lanes != 1:
        return False
    if inner.is_unsigned:
        return outer.bits > inner.bits or (outer.is_unsigned and outer.bits >= inner.bits)
    return not outer.is_unsigned and outer.bits >= inner.bits


def _fails_somewhere(cond, mask) -> bool:
    """Whether a condition (one value, or one per thread) is false in a thread under `mask`."""
    if type(cond) is np.ndarray and cond.ndim:
        bad = np.logical_not(cond)
        return bool((bad if mask is None else np.logical_and(bad, mask)).any())
    return not cond
