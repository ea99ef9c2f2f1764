"""Stage a GEMM epilogue through shared memory (a step of its own before `lower_copies`).

Expects: tile IR after pipelining; every fragment→global `T.copy` is a parallel nest
(annotation ("from_tile_op", "copy"), with its loop layout) whose body is one store
`G[g0 + i, g1 + j] = cast?(F[i, j])`. Applies to a two-level nest whose

  * source F is a gemm accumulator and which is not inside the loop of that gemm (the
    epilogue after the main loop, also inside an outer persistent loop);
  * tile is at least MIN_BYTES in the destination dtype, with rows of a multiple of 32 bytes
    (a swizzle width);
  * path from the kernel root is statement sequences, lets, serial loops with block-uniform
    trip counts, uniform branches and warp-specialisation regions (every thread of the block,
    or of the consumer group, reaches the barrier it needs);
  * shared tile fits: it may take the place of pipeline stage buffers that are dead by then
    (plan_shared reuses them), or the arena grows by the tile and stays within the limit;
  * and pass config `tl.disable_staged_epilogue` is not set.

Guarantees: such a nest becomes

    same nest, same loop layout: S[i, j] = cast?(F[i, j])       # S swizzled, conflict-free
    then either (sm_90a, static contiguous G, 16-byte rows; not `tl.disable_tma_lower` /
    `tl.disable_tma_store`):
        fence.proxy.async; barrier
        if tid == 0: one TMA store per column block of S; commit; wait_group.read 0
    or: a parallel nest G[g0 + i, g1 + j] = S[i, j] with the default (16-byte) loop layout.

Values are those of the original store (the same cast, rounded once). TMA clips rows and
columns outside the tensor; the vector path is guarded like any global store, so ragged edges
are exact. S is registered in `ctx.fresh_shared`: written before it is read wherever it is
used, so plan_shared may share its bytes with the pipeline's stage buffers, also across the
iterations of an outer loop (insert_sync orders the accesses; the issuing thread waits for
the TMA store to finish reading S before anyone passes the next barrier).
"""

from __future__ import annotations

from ..arith import Analyzer
from ..ir import nodes as ir
from ..ir.thread_range import role_group
from ..ir.visitor import any_node, collect, substitute
from .. import layout as L
from .pass_config import PassConfigKey
from .analysis.shared_memory import arena_bytes, smem_limit, tile_bytes as shared_tile_bytes
from .analysis.tma_plan import rows_16_byte_aligned, tma_tile_stores
from .analysis.scopes import SHARED

VOID = ir.DType("void")
MIN_BYTES = 4096


_call = ir.extern_stmt

_addr = ir.address_of


def _epilogue_nest(s):
    """(i, j, store, source fragment) of a fragment→global copy nest, else None."""
    if not (isinstance(s, ir.For) and s.kind == "parallel"
            and s.annotation("from_tile_op") == "copy"):
        return None
    inner = s.body
    if not (isinstance(inner, ir.For) and inner.kind == "parallel"
            and isinstance(inner.body, ir.Store)):
        return None
    st = inner.body
    if st.buffer.scope != "global":
        return None
    v = st.value
    if isinstance(v, ir.Cast):
        v = v.value
    if not (isinstance(v, ir.Load) and v.buffer.scope == "local.fragment"
            and len(v.indices) == 2 and v.indices[0] is s.var and v.indices[1] is inner.var):
        return None
    if ir.int_value(s.start) != 0 or ir.int_value(inner.start) != 0:
        return None
    return s.var, inner.var, st, v.buffer


class _Finder:
    """Walks the kernel remembering enclosing loops and whether every thread of the block
    (or consumer group) reaches the current statement."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.thread_vars = set(ctx.kernel.thread_vars)
        self.gemm_loops: dict = {}  # fragment -> list of enclosing-loop tuples
        self.candidates: list = []  # (nest, enclosing loops, uniform path)

    def _uniform(self, e) -> bool:
        return not any(v in self.thread_vars for v in collect(e, lambda n: isinstance(n, ir.Var)))

    def walk(self, s, loops=(), ok=True):
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                self.walk(x, loops, ok)
        elif isinstance(s, ir.LetStmt):
            self.walk(s.body, loops, ok)
        elif isinstance(s, ir.Gemm):
            self.gemm_loops.setdefault(s.C.buffer, []).append(loops)
        elif isinstance(s, ir.For):
            if _epilogue_nest(s) is not None:
                self.candidates.append((s, loops, ok))
                return
            good = ok and s.kind in ("serial", "pipelined") and self._uniform(s.extent)
            self.walk(s.body, loops + (s,), good)
        elif isinstance(s, ir.While):
            self.walk(s.body, loops + (s,), False)
        elif isinstance(s, ir.Attr):
            # not in a role's own thread group (roles of different threads): the staging
            # tile and its issuing thread would have to be the role's
            self.walk(s.body, loops, ok and s.key == "thread_group" and role_group(s) is None)
        elif isinstance(s, ir.If):
            split = all(isinstance(b, ir.Attr) and b.key == "thread_group"
                        for b in (s.then_body, s.else_body))
            good = ok and (split or self._uniform(s.cond))
            self.walk(s.then_body, loops, good)
            if s.else_body is not None:
                self.walk(s.else_body, loops, good)
        elif isinstance(s, ir.Allocate):
            self.walk(s.body, loops, ok)
        elif isinstance(s, ir.Kernel):
            self.walk(s.body, loops, ok)


def _mentions(node, buf) -> int:
    return len(collect(node, lambda n: (isinstance(n, (ir.Load, ir.Store)) and n.buffer is buf)
                       or (isinstance(n, ir.BufferRegion) and n.buffer is buf)))


class _Stager:
    def __init__(self, kernel, ctx):
        self.kernel = kernel
        self.ctx = ctx
        self.analyzer = Analyzer()
        self.new_allocs = []
        self.replace = {}  # id(nest) -> new statement

        self.limit = smem_limit(ctx.target.sm)
        shared = [b for b in kernel.allocs if b.scope in SHARED]
        self.arena = arena_bytes(ctx, shared)
        self.stage_buffers = [b for b in ctx.replaced_shared.values() if b in shared]

    def run(self):
        f = _Finder(self.ctx)
        f.walk(self.kernel.body)
        for nest, loops, ok in f.candidates:
            new = self._stage(nest, loops, ok, f.gemm_loops)
            if new is not None:
                self.replace[id(nest)] = new
        if not self.replace:
            return self.kernel
        body = _Replace(self.replace).visit(self.kernel.body)
        return ir.with_fields(self.kernel, body=body,
                              allocs=tuple(self.kernel.allocs) + tuple(self.new_allocs))

    def _stage(self, nest, loops, ok, gemm_loops):
        ctx = self.ctx
        i, j, store, frag = _epilogue_nest(nest)
        rows, cols = ir.int_value(nest.extent), ir.int_value(nest.body.extent)
        dtype = store.buffer.dtype
        if not ok or rows is None or cols is None or dtype.bits < 8:
            return None
        # after the main loop: every gemm into F sits in a loop that does not hold the copy
        enclosing = set(map(id, loops))
        gl = gemm_loops.get(frag)
        if not gl or not all(any(id(lp) not in enclosing for lp in g) for g in gl):
            return None
        tile_bytes = rows * cols * dtype.bytes
        if tile_bytes < MIN_BYTES or (cols * dtype.bytes) % 32:
            return None
        if not self._fits(tile_bytes, loops):
            ctx.note(f"epilogue of {frag.name} not staged: {tile_bytes} B of shared memory "
                     "do not fit")
            return None
        name = f"{frag.name}_epi"
        S = ir.Buffer(name, (rows, cols), dtype, "shared.dyn", loc=nest.loc)
        lay = L.swizzled((rows, cols), dtype.bits)
        ctx.layouts[S] = lay
        ctx.fresh_shared.add(S)
        self.arena += tile_bytes
        self.new_allocs.append(S)
        write = ir.For(nest.var, nest.start, nest.extent, nest.kind,
                       ir.For(nest.body.var, nest.body.start, nest.body.extent,
                              nest.body.kind, ir.Store(S, (i, j), store.value, loc=store.loc),
                              nest.body.step, nest.body.annotations, loc=nest.body.loc),
                       nest.step, nest.annotations, loc=nest.loc)
        tma = self._tma_store(S, lay, store, i, j, rows, cols)
        if tma is not None:
            ctx.note(f"epilogue of {frag.name} staged through shared memory ({tile_bytes} B), "
                     "TMA store")
            return ir.Seq((write,) + tma)
        i2, j2 = ir.Var(i.name), ir.Var(j.name)
        gidx = tuple(substitute(x, {i: i2, j: j2}) for x in store.indices)
        ann = (("from_tile_op", "copy"),)
        read = ir.For(i2, ir.const(0), ir.const(rows), "parallel",
                      ir.For(j2, ir.const(0), ir.const(cols), "parallel",
                             ir.Store(store.buffer, gidx, ir.Load(S, (i2, j2), dtype),
                                      loc=store.loc), 1, ann, loc=nest.loc),
                      1, ann, loc=nest.loc)
        ctx.note(f"epilogue of {frag.name} staged through shared memory ({tile_bytes} B), "
                 "16-byte stores")
        return ir.Seq((write, read))

    def _fits(self, tile_bytes, loops) -> bool:
        if self.arena + tile_bytes + 1024 <= self.limit:
            return True
        if self.ctx.flag(PassConfigKey.TL_DISABLE_SHARED_MEMORY_REUSE):
            return False
        # a stage buffer confined to a region that does not hold the copy is dead there
        for b in self.stage_buffers:
            total = _mentions(self.kernel.body, b)
            if all(_mentions(lp, b) in (0, total) for lp in loops) and \
                    tile_bytes <= shared_tile_bytes(self.ctx, b):
                return True
        return False

    # ---- TMA store ----------------------------------------------------------------------------
    def _tma_store(self, S, lay, store, i, j, rows, cols):
        ctx = self.ctx
        g = store.buffer
        if not ctx.target.is_hopper or ctx.flag(PassConfigKey.TL_DISABLE_TMA_LOWER) or \
                ctx.flag(PassConfigKey.TL_DISABLE_TMA_STORE):
            return None
        if g.computed_address or g.strides is not None or not 1 <= len(g.shape) <= 5 or \
                not rows_16_byte_aligned(g):
            return None
        blk = getattr(lay, "column_block", None)
        if not getattr(lay, "swizzle_bytes", None) or not blk or rows % 8 or rows > 256:
            return None
        # each global index must be start + i, start + j (j innermost) or loop-invariant
        zero = {i: ir.const(0), j: ir.const(0)}
        starts = [substitute(x, zero) for x in store.indices]
        dims = {}
        for d, (x, st) in enumerate(zip(store.indices, starts)):
            for v in (i, j):
                if self.analyzer.can_prove_equal(x, ir.binary("add", st, v)):
                    dims[v] = d
                    break
            else:
                if any_node(x, lambda n: n is i or n is j):
                    return None
        if dims.get(j) != len(g.shape) - 1 or i not in dims:
            return None
        return tma_tile_stores(ctx, "tl::tma_store", f"{g.name}_store_desc", g, S, dims[i],
                               rows, cols, blk, lay.swizzle_bytes, starts)


class _Replace:
    def __init__(self, table):
        self.table = table

    def visit(self, s):
        from ..ir.visitor import Mutator

        table = self.table

        class M(Mutator):
            def visit_For(self, f):
                new = table.get(id(f))
                return new if new is not None else self.generic(f)

        return M().visit(s)


def stage_epilogues(kernel: ir.Kernel, ctx) -> ir.Kernel:
    if not ctx.target.is_cuda or ctx.flag(PassConfigKey.TL_DISABLE_STAGED_EPILOGUE):
        return kernel
    return _Stager(kernel, ctx).run()
