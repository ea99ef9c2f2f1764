"""A fragment added element-wise into a global tile becomes one TMA reduction of a staged copy
on sm_90a (`tl.disable_tma_lower` keeps the adds element-wise).

    for i, j in T.Parallel(M, N):                    T.copy(F, F_staged)        # shared
        T.atomic_add(G[r0 + i, c0 + j], F[i, j])  ==  T.atomic_add(G[r0:r0+M, c0:c0+N],
                                                                    F_staged, use_tma=True)

Why: the element-wise adds from a wgmma accumulator reach L2 as 8 rows of 32 bytes per warp
instruction (each lane holds 2 consecutive columns of a row; 8 rows per warp), i.e. 8 L2
requests of one sector each, where the reference's kernels (honouring a `T.annotate_layout`
on the global buffer, which this compiler ignores) send one 128-byte line per instruction.
One `cp.reduce.async.bulk.tensor` of the staged tile sends whole lines and takes the adds off
the threads; the cost is the tile's shared memory, its stores, a barrier and the issuing
thread's wait until the TMA unit has read it (transform/tma_reduce.py).

Measured on an H200, the attention backward kernels as the reference's examples write them
(kernel time, in a call that also dropped a proxy fence, which alone measured no gain): MHA
backward 15.0 -> 13.1 µs, sink backward 39.8 -> 35.9, GQA backward 29.9 -> 27.6.

Expects: tile IR after `parallel_copies`, before `warp_roles` (the staged copy and the TMA add
become the role's tile operations like any written ones). Guarantees: on sm_90a (TMA lowering
not disabled), a parallel nest (no annotations, starting at 0) whose whole body is one relaxed
`atomic_add(G[...], F[i, j])` (or a cast of F to G's type, which is then the same type) where F
is a 2-D fragment of exactly the nest's extents, read at the nest's variables in order, and G a
static, contiguous float global tensor (a type the TMA unit adds) whose innermost index
is `c0 + j` and one other index `r0 + i`, every other index free of the loop, becomes the two
statements above. The sums are the same (each element added once, atomically per element;
relaxed order as written). Anything else is left as written; so are adds under a branch on the
thread index (the staged add has a barrier every thread reaches).
"""

from __future__ import annotations

from ..arith import Analyzer
from ..ir import nodes as ir
from ..ir.dtype import TMA_ADD_DTYPES
from ..ir.visitor import Mutator, collect
from .analysis.parallel_nest import match_indices, parallel_nest
from .analysis.scopes import SHARED
from .analysis.shared_memory import smem_limit
from .pass_config import PassConfigKey


def _atomic_add_call(body):
    if not isinstance(body, ir.Evaluate) or not isinstance(body.value, ir.Call):
        return None
    c = body.value
    if c.op != "atomic_add" or dict(c.attrs).get("memory_order", "relaxed") != "relaxed":
        return None
    return c


class _Stage(Mutator):
    def __init__(self, kernel, ctx):
        self.ctx = ctx
        self.thread_vars = {id(v) for v in kernel.thread_vars}
        self.analyzer = Analyzer()
        self.new_allocs = []
        # the tiles as declared (before the planner overlaps some and the pipeliner doubles
        # others): a kernel whose declared tiles and the staged copy pass the limit keeps its
        # element-wise atomics
        self.shared_bytes = sum(b.dtype.bytes * b.numel() for b in kernel.allocs
                                if b.scope in SHARED and b.is_static())
        self.budget = smem_limit(ctx.target.sm) - 1024

    def visit_If(self, s):
        # the staged add has a barrier every thread of the block must reach
        if any(id(v) in self.thread_vars
               for v in collect(s.cond, lambda n: isinstance(n, ir.Var))):
            return s
        return self.generic(s)

    def visit_AtomicTile(self, s):
        # T.atomic_add(G[region], F): the tile form of the same adds
        src = s.src
        if s.op != "add" or s.use_tma or s.cluster_sum or s.memory_order != "relaxed" \
                or not isinstance(src, ir.BufferRegion) \
                or src.buffer.scope != "local.fragment" or len(src.buffer.shape) != 2 \
                or any(ir.int_value(x) != 0 for x, _ in src.region) \
                or [ir.int_value(e) for e in src.extents] != list(src.buffer.shape):
            return s
        kept = [d for d, e in enumerate(s.dst.extents) if ir.int_value(e) != 1]
        G = s.dst.buffer
        if len(kept) != 2 or kept[-1] != len(G.shape) - 1:
            return s  # the tile's columns must run along G's innermost dimension
        if [ir.int_value(s.dst.extents[d]) for d in kept] != list(src.buffer.shape):
            return s
        staged = self._stage(G, src.buffer, s.loc)
        if staged is None:
            return s
        whole = ir.BufferRegion(staged, ((0, staged.shape[0]), (0, staged.shape[1])))
        return ir.Seq((ir.Copy(src, whole, (), loc=s.loc),
                       ir.AtomicTile("add", whole, s.dst, "relaxed", True, loc=s.loc)))

    def visit_For(self, s):
        if s.kind == "parallel":
            staged = self._staged(s)
            return s if staged is None else staged
        return self.generic(s)

    def _staged(self, loop):
        nest = parallel_nest(loop)
        if nest is None or len(nest[0]) != 2:
            return None
        loops, body = nest
        call = _atomic_add_call(body)
        if call is None:
            return None
        dst, value = call.args
        if isinstance(value, ir.Cast) and value.dtype == dst.dtype:
            value = value.value
        if not (isinstance(dst, ir.Load) and isinstance(value, ir.Load)):
            return None
        G, F = dst.buffer, value.buffer
        if F.scope != "local.fragment" or len(F.shape) != 2:
            return None
        extents = [ir.int_value(lp.extent) for lp in loops]
        if list(F.shape) != extents or None in extents:
            return None
        loop_vars = [lp.var for lp in loops]
        if len(value.indices) != 2 or any(idx is not v for idx, v in zip(value.indices,
                                                                         loop_vars)):
            return None
        matched = match_indices(self.analyzer, dst.indices, loop_vars)
        if matched is None or matched[-1][0] is not loop_vars[1]:
            return None  # the tile's columns must run along G's innermost dimension
        if [id(v) for v, _ in matched if v is not None] != [id(v) for v in loop_vars]:
            return None
        staged = self._stage(G, F, loop.loc)
        if staged is None:
            return None
        rows, cols = extents
        extent_of = {id(v): n for v, n in zip(loop_vars, extents)}
        region = tuple((start, extent_of[id(v)] if v is not None else 1) for v, start in matched)
        whole = ir.BufferRegion(staged, ((0, rows), (0, cols)))
        return ir.Seq((
            ir.Copy(ir.BufferRegion(F, ((0, rows), (0, cols))), whole, (), loc=loop.loc),
            ir.AtomicTile("add", whole, ir.BufferRegion(G, region), "relaxed", True,
                          loc=loop.loc)))


    def _stage(self, G, F, loc):
        """The shared tile F is staged in before its TMA add into G, or None where the TMA
        unit cannot add it (tma_reduce.py's conditions that are known here) or it does not
        fit."""
        if G.scope != "global" or F.dtype is not G.dtype or G.dtype.name not in TMA_ADD_DTYPES \
                or G.strides is not None or G.computed_address \
                or not all(isinstance(d, int) for d in G.shape) or len(G.shape) > 5:
            return None
        rows, cols = F.shape
        if rows > 256 or (cols * G.dtype.bytes) % 16 or G.shape[-1] * G.dtype.bytes % 16:
            return None
        need = rows * cols * G.dtype.bytes
        if self.shared_bytes + need > self.budget:
            self.ctx.note(f"T.atomic_add into {G.name} from fragment {F.name}: element-wise "
                          f"({self.shared_bytes} + {need} bytes of shared memory would pass "
                          f"{self.budget})")
            return None
        staged = ir.Buffer(f"{F.name}_staged", (rows, cols), F.dtype, "shared.dyn", loc=loc)
        self.new_allocs.append(staged)
        self.shared_bytes += need
        self.ctx.note(f"T.atomic_add into {G.name} from fragment {F.name}: staged in shared "
                      "memory for one TMA reduction")
        return staged


def stage_fragment_atomics(kernel: ir.Kernel, ctx) -> ir.Kernel:
    if not ctx.target.is_hopper or ctx.flag(PassConfigKey.TL_DISABLE_TMA_LOWER):
        return kernel
    stage = _Stage(kernel, ctx)
    body = stage.visit(kernel.body)
    if not stage.new_allocs:
        return kernel
    return ir.with_fields(kernel, body=body, allocs=tuple(kernel.allocs) + tuple(stage.new_allocs))
