"""Hopper pipelines: TMA loads, mbarrier rings and a producer warpgroup (sm_90a).

Expects: tile IR after layout inference. Applies when the target is sm_90a, the block is whole
warpgroups, warp specialisation and TMA are not disabled by pass config, and the kernel has
exactly one `T.Pipelined` loop, at its top level or inside serial loops and branches on
block-uniform values there (a persistent kernel's tile loop, `T.Persistent`), whose
global→shared copies TMA can perform
(static shapes, 16-byte aligned strides, whole destination tiles, boxes of <= 256 elements,
no dtype conversion, indices computable by the producer), and every `T.Parallel` gather into
shared memory that the pipeliner could issue as cp.async is a `T.c2d_im2col` tile one TMA load
in im2col mode produces (tma_im2col.py; a general gather TMA cannot do, and leaving it
synchronous in the consumers costs more than the TMA of the other operand gains). Otherwise
nothing changes and the cp.async pipeliner takes the loop. A shared tile the consumers compute
for a wgmma every iteration is double-buffered (computed_operands.py).

Guarantees: the kernel is launched with one more warpgroup, the producer, whose first thread
issues every TMA load of the loop; the original threads (the consumers, thread indices
unchanged) run everything else:

    if tid == 0: init full[s] (1 arrival + tx bytes), empty[s] (T arrivals); fence
    __syncthreads()
    if tid >= T:  producer (setmaxnreg.dec):  for k: wait empty[k%S] parity ((k/S)&1)^1;
                                                     expect_tx(full[k%S], bytes); TMA -> stage
    else:         consumers (setmaxnreg.inc): <code before the loop>
                                              for k: wait full[k%S] parity (k/S)&1;
                                                     body on stage k%S; arrive empty[k%S]
                                              <code after the loop>

Inside a tile loop, producer and consumers both run the loops and branches around the
pipelined loop (the producer with the lets it can compute from parameters alone; loads or trip
counts that need more keep the cp.async pipeline), and the ring position of iteration k is
k - start plus the iterations run in earlier tiles (`pipe_done`), so the producer fills the
next tile's stages while the consumers finish this one, and tiles whose loops run any number
of times, zero included, stay in step. The stage buffers then stay out of reach of epilogue
tiles (`ctx.pinned_shared`); multicast and double-buffered computed operands are not used
there (the order/stage schedule is: its prologue and epilogue passes run per tile). A copy of
the tile just before the pipelined loop whose shared tile only that loop reads
(FlashAttention's Q) is issued by the producer too, once per tile, into one of two buffers
(one when two do not fit) on its own full/empty ring indexed by a count of tiles
(`tiles_done`): the consumers wait for it where their copy was and hand it back after the
loop, so the next tile's Q arrives while this tile runs.

In a `T.ClusterKernel`, a tile every block of a cluster loads alike (its source region and the
trip count independent of the block index along the cluster's axes) is multicast: each block
loads rows [rank * R/cs, (rank + 1) * R/cs) of it into every block of the cluster
(`tl::tma_load_multicast`, still expecting the whole tile's bytes on its own full barrier);
the empty barriers then count one arrival per consumer warp of every block (each warp hands
a stage back to all of them), and cluster barriers replace the first `__syncthreads()` and
end the kernel (no block exits while a peer may still signal it).

A loop body that is one branch on a block-uniform condition (`if BlockMask[by, bx, k]:`,
analysis/uniform.py) that the producer can evaluate too runs the plain ring with both roles
evaluating the branch: the ring position is then the count of iterations run so far
(`pipe_done`, advanced inside the branch by each role, across tiles in a tile loop), so a
skipped iteration takes no slot and producer and consumers meet on the same slot and phase
of every iteration that runs. Such a loop gets no order/stage schedule, double-buffered
computed operands or multicast (the blocks of a cluster may skip different iterations).

Parities follow HARDWARE §8 (a fresh barrier reports parity 1 complete, so the producer's
first S waits pass). A zero-trip loop waits on nothing; no barrier waits on a phase that
never completes. The regions are `Attr("thread_group", ...)` so the barrier pass uses a named
barrier over the consumers inside them.

With `T.Pipelined(..., order=, stage=, group=)` (checked by overlap_schedule.py; a schedule
that would change the results is ignored with a note) the consumers run that schedule instead:
pass t runs each statement group for iteration t - stage, in `order`, after a prologue and
before an epilogue guarded by the trip count; every TMA tile has its own full/empty ring,
waited for before its first reader and released after its last; and its wgmma gemms are
issued asynchronously (wg_wait=-1), leaving the waits to wgmma_wait.py (FlashAttention-3's
schedule: S(k) = Q K(k)^T and P(k-1) V(k-1) run while the softmax of S(k) does).
"""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.thread_range import has_user_roles
from ...ir.visitor import Mutator, any_node, collect, substitute
from ..analysis.gather import gather_parts
from .computed_operands import computed_operands, publish_then_issue, swap_buffers
from ..pass_config import PassConfigKey
from ..analysis.shared_memory import arena_bytes, smem_limit
from ..analysis.buffer_use import touched_buffers
from ..analysis.consumed_loads import loads_consumed_by_wgmma
from ...arith import Analyzer
from ...env import env
from ..analysis.affine import constant_upper_bound
from ..analysis.scoped import bind_kernel_vars
from ..analysis.device_facts import nominal_sm_count
from ..analysis.overlap_schedule import auto_schedule, depth, has_annotation, schedule
from ..analysis.buffer_use import buffers_read, whole_buffer_user, written_buffers
from ..analysis.loop_items import (Rebuffer, copy_lets_needed, copy_oob_value, flatten,
                                  gather_exprs, gather_producer, lets_needed, rebuild, stack_layout)
from .tile_nest import TileNest, levels_to, slot_and_phase
from ..analysis.uniform import depends_on, let_values, uniform_guard
from .tma_im2col import Im2colPlan, im2col_plan
from ...codegen.launch import TmaDescriptor
from ..analysis.tma_plan import tma_plan
from ..analysis.scopes import SHARED, is_global_to_shared

VOID = ir.DType("void")
U64 = ir.DType("uint64")
PRODUCER_THREADS = 128
# the longest loop whose stage tiles get a full barrier each (_first_reads)
TILE_BARRIER_MAX_TRIPS = 4


_call = ir.extern_stmt

_addr = ir.address_of


class WarpSpecializer:
    def __init__(self, kernel: ir.Kernel, ctx):
        self.kernel = kernel
        self.ctx = ctx
        self.T = kernel.num_threads
        self.extra_allocs = []  # second copies of computed operands
        self.cluster = 1  # blocks per cluster whose consumers release every stage (multicast)
        self.nest = None  # the loops around a T.Pipelined loop not at the top level
        self.kept_because = None  # why warp specialisation over the cp.async pipeline
        self.tile_plans = []  # loads of a tile the producer issues once per tile (_tile_plans)
        self.guard = None  # GuardedBody: the loop's work under a block-uniform branch
        self.guard_lets = []  # the loop-body lets its condition reads
        self.run_counter = None  # a guarded loop's count of the iterations run (_run_count)

    def applicable(self):
        ctx = self.ctx
        if not ctx.target.is_hopper or self.T % 128 or has_user_roles(self.kernel):
            return False
        if ctx.flag(PassConfigKey.TL_DISABLE_WARP_SPECIALIZED) or \
                ctx.flag(PassConfigKey.TL_DISABLE_TMA_LOWER):
            return False
        return True

    def run(self):
        if not self.applicable():
            return None
        items = flatten(self.kernel.body)
        pipelined = collect(self.kernel.body, lambda n: isinstance(n, ir.For)
                            and n.kind == "pipelined")
        if len(pipelined) != 1:
            return self._why("needs exactly one T.Pipelined loop")
        loop = pipelined[0]
        levels = levels_to(items, loop, set(self.kernel.thread_vars))
        if levels is None:
            return self._why("the T.Pipelined loop is neither at the kernel's top level nor "
                             "inside serial loops and branches on block-uniform values there")
        li = levels[0][1]
        if len(levels) > 1:
            self.nest = TileNest(levels, self.ctx)
            if not self.nest.producer_can_compute([loop.start, loop.extent]):
                return self._why("the trip count of the T.Pipelined loop depends on values "
                                 "computed from memory in the loops around it")
        stages = int(loop.annotation("num_stages", 0) or 0)
        if stages < 1 or loop.step != 1:
            return None  # nothing to overlap: the plain loop is as good
        written = written_buffers(loop.body)
        self.guard = uniform_guard(loop.body, self.kernel, written)
        body_items = self.guard.items if self.guard else flatten(loop.body)
        lets = {it.var: it for it in body_items if isinstance(it, tuple)}
        plans = []
        for it in body_items:
            if isinstance(it, ir.Copy) and is_global_to_shared(it):
                deps = copy_lets_needed(it, lets, written)
                if whole_buffer_user(loop.body, it.dst.buffer):
                    return self._why(f"{it.dst.buffer.name} is reduced or scanned as a whole")
                if deps is None or it.src.buffer in written:
                    return self._why(f"copy into {it.dst.buffer.name} depends on values the "
                                     "loop computes")
                plan, reason = tma_plan(it, self.ctx.layouts[it.dst.buffer], deps,
                                        copy_oob_value(self.kernel, it))
                if plan is None:
                    return self._why(f"copy {it.src.buffer.name} -> {it.dst.buffer.name} does "
                                     f"not meet TMA's constraints: {reason}")
                if self.nest and not self.nest.producer_can_compute(
                        [e for region in it.src.region for e in region] +
                        [d.value for d in deps]):
                    return self._why(f"the load into {it.dst.buffer.name} depends on values "
                                     "computed from memory in the loops around it")
                plans.append(plan)
        if not plans:
            return None
        outside = [it for its, i in levels for it in its[:i] + its[i + 1:]]
        rest_of_kernel = rebuild(outside)
        for it in body_items:
            if not isinstance(it, tuple) and gather_producer(self.ctx.kernel, it, body_items,
                                                             rest_of_kernel, written):
                name = gather_parts(it)[0].buffer.name
                deps = lets_needed(gather_exprs(it), lets, written)
                plan, reason = im2col_plan(it, self.ctx.layouts[gather_parts(it)[0].buffer],
                                           deps) if deps is not None else (None, None)
                if plan is None:
                    return self._why(f"{name} is gathered by a T.Parallel loop (cp.async, not "
                                     "TMA)" + (f"; no TMA im2col: {reason}" if reason else ""))
                if self.nest and not self.nest.producer_can_compute(
                        list(gather_exprs(it)) + [d.value for d in deps]):
                    return self._why(f"the load into {name} depends on values computed from "
                                     "memory in the loops around it")
                plans.append(plan)
        for p in plans:
            if any(_mentions(o, p.dst) for o in outside if not isinstance(o, tuple)):
                return self._why(f"{p.dst.name} is used outside the loop")
        if self.nest:
            self.tile_plans = self._tile_plans(levels[-1], outside, plans, written)
        if self.guard:
            self.guard_lets = lets_needed([self.guard.cond], lets, written)
            if self.guard_lets is None or not self._producer_computes_guard(items[:li]):
                return self._why("the branch around the loop body reads values the producer "
                                 "warpgroup cannot compute")
            if stages == 1:
                return self._why("one stage under a branch")
        if stages == 1:
            if not self.nest and \
                    PassConfigKey.TL_DISABLE_WARP_SPECIALIZED.value not in self.ctx.configs:
                more = self._more_blocks_than_sms()
                # H200, 2026-11-26, single-stage FlashAttention written as the reference's
                # examples (128/128 tiles, 128 threads): B8 H32 S4096 (1024 blocks), the
                # reference's cp.async loop 6.74 ms against its warp-specialised 9.04; B1 H32
                # S256 (64 blocks) the warp-specialised loop 0.0204-0.0212 against 0.0237-0.0278
                if more:
                    return self._why(f"one stage over {more}: the cp.async loop issues each "
                                     "tile's next load after its last reader and fits more "
                                     "blocks per SM than a warp-specialised one "
                                     "(pass_configs={'tl.disable_warp_specialized': False} "
                                     "keeps warp specialisation)")
            return self._single_stage(items, li, loop, plans, body_items)
        slots = None
        if self.guard:
            pass  # iterations may be skipped: the plain ring, positions counted (_build)
        elif has_annotation(loop):
            slots = self._overlap_slots(loop, stages, plans, body_items)
        elif self.T >= 256 and not self.ctx.flag(PassConfigKey.TL_DISABLE_WGMMA_OVERLAP) \
                and self._overlap_fits_registers():
            slots = self._overlap_slots(loop, stages, plans, body_items, auto=True)
        if slots is None and not self.nest:
            reason = self._several_blocks_per_sm_win(stages, plans, body_items)
            if reason:
                return self._why(reason)
        if slots is None and not self.nest and not self.guard:
            # (under a branch, the blocks of a cluster may skip different iterations)
            self._multicast(loop, plans, items[:li] + body_items)
        return self._build(items, li, loop, stages, plans, body_items, slots)

    def _kept(self, reason):
        """Record why warp specialisation beats the cp.async pipeline here (the note of
        _build says it); None: keep warp specialisation."""
        self.kept_because = reason
        return None

    def _fragment_registers(self) -> int:
        """32-bit registers a consumer thread needs for the kernel's fragments."""
        regs = 0
        for b in self.kernel.allocs:
            if b.scope == "local.fragment" and b in self.ctx.layouts:
                regs += -(-self.ctx.layouts[b].num_values * b.dtype.bits // 32)
        return regs

    def _overlap_fits_registers(self) -> bool:
        """The derived gemm/softmax overlap keeps the scores of one iteration alive while the
        previous P V runs, so it needs room beyond the fragments: with three consumer
        warpgroups (160 registers each after setmaxnreg) FlashAttention 192/128 spilled 184
        bytes and ran at half speed; with two (232) 128/128 ran 11% faster (H200)."""
        split = self._register_split()
        budget = split[1] if split else min(255, 65536 // (self.T + PRODUCER_THREADS))
        return self._fragment_registers() + 48 <= budget

    def _several_blocks_per_sm_win(self, stages, plans, body_items):
        """Why the cp.async pipeline beats warp specialisation for this GEMM main loop, or
        None. A warp-specialised block holds a producer warpgroup's registers and is launched
        one per SM; the cp.async pipeline of one warpgroup fits two or three blocks per SM,
        which hide each other's latencies. That wins when there are more blocks than SMs to
        keep busy (or an unknown number: dynamic sizes) and three or more stages let the
        cp.async pipeline overlap at all, and the warp-specialised block's registers (its
        fragments and some 32 more a thread) allow only one per SM. H200, 2026-11-26,
        128/128/32 tiles on 128 threads,
        3 stages: 4096^3 0.242 ms against 0.353 warp-specialised, 2048^3 0.039 against 0.049,
        dynamic 4096^3 0.275 against 0.352; but 1024^3 (64 blocks) 0.0197 against 0.0153, and
        64/64/32 with 2 stages 0.026 against 0.017."""
        if PassConfigKey.TL_DISABLE_WARP_SPECIALIZED.value in self.ctx.configs:
            return self._kept("asked for with tl.disable_warp_specialized=False")
        if self.T != 128:
            return self._kept(f"{self.T // 128} consumer warpgroups")
        if stages < 3:
            return self._kept(f"{stages} stages, too few for the cp.async pipeline to overlap")
        if self.kernel.attr("cluster_dims"):
            return self._kept("a cluster launch")
        plan_ids = {id(p.stmt) for p in plans}
        rest = [it for it in body_items if not isinstance(it, tuple) and id(it) not in plan_ids]
        if not rest or not all(self.ctx.is_wgmma(it) for it in rest):
            return None  # only plain GEMM main loops were measured
        # a warp-specialised block of small tiles needs few registers and fits several per
        # SM itself (64/64/32 on 128 threads: 0.017 ms against 0.027 for cp.async, H200)
        per_thread = -(-(self._fragment_registers() + 32) // 8) * 8
        fit = 65536 // ((self.T + PRODUCER_THREADS) * per_thread)
        if fit >= 2:
            return self._kept(f"its blocks fit {fit} per SM (small fragments)")
        count = self._more_blocks_than_sms()
        if count is None:
            return self._kept("no more blocks than SMs")
        return (f"one consumer warpgroup over {count}: the "
                "cp.async pipeline fits several blocks per SM, a warp-specialised block one "
                "(pass_configs={'tl.disable_warp_specialized': False} keeps it)")

    def _more_blocks_than_sms(self):
        """How the grid outnumbers the SMs ("1024 blocks (more than the 132 SMs)", or a grid
        of dynamic size, taken as more), or None when every block gets an SM of its own."""
        blocks = 1
        for g in self.kernel.grid:
            g = ir.int_value(g)
            if g is None:
                blocks = None
                break
            blocks *= g
        sms = nominal_sm_count(self.ctx.target)  # a GPU of another count runs it as well
        if blocks is not None and blocks <= sms:
            return None
        return (f"{blocks} blocks (more than the {sms} SMs)" if blocks is not None else
                f"a grid of dynamic size (taken as more than the {sms} SMs)")

    def _tile_plans(self, level, outside, plans, written):
        """The copies of a tile (global -> shared, just before the pipelined loop, at its
        level of the nest) that the producer can issue too: TMA performs them, the producer
        computes their region, and their tile is read only by the pipelined loop (as
        FlashAttention's Q). The producer then loads the next tile's Q while the consumers
        finish this one, instead of the consumers loading it with the loop's stages idle."""
        items, i = level
        out = []
        for it in items[:i]:
            if not (isinstance(it, ir.Copy) and is_global_to_shared(it)):
                continue
            dst = it.dst.buffer
            if dst in written or any(p.dst is dst for p in plans) or \
                    any(_mentions(o, dst) for o in outside
                        if not isinstance(o, tuple) and o is not it):
                continue
            if not self.nest.producer_can_compute([e for r in it.src.region for e in r]):
                continue
            plan, _ = tma_plan(it, self.ctx.layouts[dst], [], copy_oob_value(self.kernel, it))
            if plan is not None:
                out.append(plan)
        return out

    def _tile_ring(self, plans):
        """Buffers and barriers for the tile loads: two buffers (the next tile's loads start
        while this tile runs) when they fit in shared memory with everything else, else
        one. Returns (mapping, full, empty, depth) or None without tile loads."""
        if not plans:
            return None
        ctx = self.ctx
        tiles = {p.dst for p in plans}
        allocs = [ctx.replaced_shared.get(b, b) for b in self.kernel.allocs] + \
            list(tiles)  # a second copy of each
        depth = 2 if arena_bytes(ctx, allocs) + 1024 <= smem_limit(ctx.target.sm) else 1
        mapping = {b: self._multi_buffer(b, depth) for b in tiles}
        full = ctx.add_scratch_shared("tile_full_bar", (depth,), U64)
        empty = ctx.add_scratch_shared("tile_empty_bar", (depth,), U64)
        return mapping, full, empty, depth

    def _multicast(self, loop, plans, lets):
        """In a kernel launched in clusters, mark the plans whose tile is the same in every
        block of a cluster for multicast: neither the tile's source region (through the lets
        it reads) nor the trip count depends on a block index along a cluster axis, its box
        has one dimension besides the innermost to split into one slice per block, and each
        slice starts on a swizzle atom (8 rows). Each block's producer then loads its slice
        into every block of the cluster, and a stage is free only once the consumers of all
        of them have released it (their empty barriers count every block's warps)."""
        dims = self.kernel.attr("cluster_dims")
        if not dims or self.kernel.attr("use_swizzle") is not None:
            return
        cs = dims[0] * dims[1] * dims[2]
        axes = {v for v, c in zip(self.kernel.block_vars, dims) if c > 1}
        values = {it.var: it.value for it in lets if isinstance(it, tuple)}
        if depends_on((loop.start, loop.extent), axes, values):
            return self.ctx.note("no multicast: the trip count differs between the blocks of a "
                                 "cluster")
        for p in plans:
            if isinstance(p, Im2colPlan):
                continue
            region = list(p.copy.src.starts) + list(p.copy.src.extents)
            split = [d for d, b in enumerate(p.box[:-1]) if b > 1]
            if depends_on(region, axes, values) or len(split) != 1 or len(p.dst.shape) != 2:
                continue
            rows = p.box[split[0]]
            if rows % cs or (p.swizzle and (rows // cs) % 8):
                self.ctx.note(f"no multicast of {p.dst.name}: {rows} rows do not split into "
                              f"{cs} slices of whole swizzle atoms")
                continue
            p.multicast = (split[0], cs)
        if any(p.multicast for p in plans):
            self.cluster = cs

    def _overlap_slots(self, loop, S, plans, body_items, auto=False):
        """The consumer schedule of an order/stage/group annotation (overlap_schedule.py), or
        None (with a note) when it cannot be honoured: the plain warp-specialised loop then runs,
        which computes the same. `auto`: the loop has no annotation; use the schedule
        `auto_schedule` derives for an attention-like body (with two consumer warpgroups or
        more, where the warpgroups then also take turns: pingpong.py), silently nothing for
        other bodies."""
        lets = [it for it in body_items if isinstance(it, tuple)]
        stmts = [it for it in body_items if not isinstance(it, tuple)]
        plan_ids = {id(p.stmt) for p in plans}
        annotation = None
        if auto:
            why = []
            annotation = auto_schedule(stmts, plan_ids, self.ctx.is_wgmma,
                                       self._trip_bound(loop), why)
            if annotation is None:
                return self._note_overlap(why[0], auto) if why else None
        compute = [st for st in stmts if id(st) not in plan_ids]
        if any(any_node(st, lambda n, v=let.var: n is v) for let in lets for st in compute):
            return self._note_overlap("the loop body binds values the schedule would move", auto)
        slots, reason = schedule(loop, stmts, plan_ids, annotation)
        if slots is None:
            return self._note_overlap(reason, auto)
        if depth(slots) >= S:
            return self._note_overlap(f"stage {depth(slots)} needs num_stages > {depth(slots)} "
                                      "(one buffer per iteration in flight)", auto)
        for p in plans:
            if not any(p.dst in touched_buffers(s.stmt) for s in slots):
                return self._note_overlap(f"nothing reads {p.dst.name}", auto)
        if auto:
            self.ctx.note("gemms overlapped with the softmax (FlashAttention-3's schedule, "
                          "derived): " + ", ".join(f"{sl.pos}@{sl.stage}" for sl in
                                                   sorted(slots, key=lambda sl: sl.key))
                          + " (tl.disable_wgmma_overlap keeps the plain loop)")
        return slots

    def _trip_bound(self, loop):
        """An upper bound of `loop`'s trip count known at compile time (through the grid's
        extents), or None."""
        analyzer = Analyzer()
        bind_kernel_vars(analyzer, self.kernel)
        return constant_upper_bound(loop.extent, analyzer)

    def _note_overlap(self, reason, auto=False):
        if auto:
            self.ctx.note(f"no derived gemm/softmax overlap: {reason}; plain pipelined loop")
            return None
        self.ctx.note(f"order/stage annotation ignored: {reason}; plain pipelined loop")
        return None

    def _why(self, reason):
        self.ctx.note(f"no warp specialisation: {reason}; using the cp.async pipeline")
        return None

    # ---- construction ----------------------------------------------------------------------
    def _multi_buffer(self, b: ir.Buffer, S: int) -> ir.Buffer:
        """`b` with a leading stage dimension of S (its layout stacked S times)."""
        nb = ir.Buffer(b.name, (S,) + tuple(b.shape), b.dtype, b.scope, loc=b.loc)
        self.ctx.layouts[nb] = stack_layout(self.ctx.layouts[b], S, b.dtype.bytes)
        self.ctx.replaced_shared[b] = nb
        return nb

    def _producer(self, items_before, producer_loop):
        """The producer warpgroup's code: the lets it needs (those reading only parameters),
        then one thread running `producer_loop`, after giving registers back. Returns it with
        the (producer, consumer) register split, or None when none is made."""
        ctx = self.ctx
        params = {b for b in ctx.func.params if isinstance(b, ir.Buffer)}
        pre_lets = [it for it in items_before if isinstance(it, tuple)
                    and not (buffers_read(it.value) - params)]
        producer = rebuild(pre_lets + [ir.If(ir.compare("eq", ctx.tid, self.T), producer_loop,
                                              None)])
        regs = self._register_split()
        if regs is not None:
            producer = ir.Seq((_call(f"tl::setmaxnreg_dec<{regs[0]}>"), producer))
        return producer, regs

    def _build(self, items, li, loop, S, plans, body_items, slots=None):
        ctx, T = self.ctx, self.T
        if slots is not None:
            return self._build_overlapped(items, li, loop, S, plans, slots)
        mapping = {}
        for p in plans:
            b = p.dst
            if b not in mapping:
                mapping[b] = self._multi_buffer(b, S)
        k, start, n = loop.var, loop.start, loop.extent

        # consumers: the loop without its copies, between the barrier waits
        plan_ids = {id(p.stmt) for p in plans}
        rest = [it for it in body_items if isinstance(it, tuple) or id(it) not in plan_ids]
        single = ir.int_value(n) is not None and ir.int_value(n) < 2
        # With two stages the load of iteration k+1 could only start once the tile of k is
        # published (the stage of k-1 is handed back there) and would be waited for at once:
        # measured slower on an H200 (int4 dequant 256/64/128: 0.0946 vs 0.0777 ms)
        off = ctx.flag(PassConfigKey.TL_DISABLE_WGMMA_OVERLAP) or S < 3
        computed = [] if single or off or self.nest or self.guard else computed_operands(
            rest, ctx.is_wgmma, items[:li] + items[li + 1:])
        if computed and not self._second_copies_fit(computed):
            ctx.note(f"{', '.join(b.name for b in computed)} not double-buffered: a second "
                     "copy does not fit in shared memory")
            computed = []
        n_lets = len(self.guard.lets) if self.guard else 0  # never copies: rest's head
        first_reads = None if computed else self._first_reads(rest[n_lets:], mapping, loop)
        if first_reads is None:
            fulls = {b: None for b in mapping}
            fulls[None] = ctx.add_scratch_shared("full_bar", (S,), U64)
        else:
            fulls = {b: ctx.add_scratch_shared(f"{b.name}_full", (S,), U64) for b in mapping}
        full = fulls.get(None)
        empty = ctx.add_scratch_shared("empty_bar", (S,), U64)
        rel = ir.binary("sub", k, start)
        if self.guard:
            rel = self._run_count()
        elif self.nest:
            rel = self.nest.position(rel)
        stage, phase = slot_and_phase(rel, S, counted=self.nest is not None or bool(self.guard))
        total_bytes = sum(p.bytes for p in plans)

        # producer: one thread issues the TMA loads of every stage (with one barrier per
        # tile, each tile's bytes are expected on its own barrier just before its loads)
        issue = [_call("tl::mbarrier_wait", _addr(empty, (stage,)),
                       ir.binary("bitxor", phase, 1))]
        if full is not None:
            issue.append(_call("tl::mbarrier_arrive_expect_tx", _addr(full, (stage,)),
                               ir.const(total_bytes)))
        for b in mapping:
            tile_plans = [p for p in plans if p.dst is b]
            bar = full if full is not None else fulls[b]
            if full is None:
                issue.append(_call("tl::mbarrier_arrive_expect_tx", _addr(bar, (stage,)),
                                   ir.const(sum(p.bytes for p in tile_plans))))
            issue += [self._tma_loads(p, mapping, stage, bar) for p in tile_plans]
        producer_body = ir.Seq(tuple(issue))
        producer_loop = ir.For(k, start, n, "serial", self._guarded(producer_body), loc=loop.loc)

        # The gemms of a plain loop wait for themselves: leaving wgmma(k) in flight and
        # releasing stage k-1 one iteration late measured slower with 3 stages on an H200,
        # with two consumer warpgroups (652 vs 670 TFLOP/s, 4096^3, 128/256/64) and with one
        # (4096^3 at 128/128/32: 305 vs 389 TFLOP/s; 1024^3: 115 vs 140; 2026-11-26).
        release = self._release(_addr(empty, (stage,)), tuple(mapping.values()))
        if computed:
            consumer_loop = self._double_buffered(
                loop, S, full, empty, mapping, self._fence_after_reads(rest, set(mapping)),
                computed)
        else:
            # the stage goes back right after its last reader, not at the end of the body:
            # the producer refills it while the rest of the iteration runs (a 2xAcc FP8
            # GEMM's promotion of the accumulator, an epilogue-like update)
            rest, outer_lets = rest[n_lets:], rest[:n_lets]
            last = _last_reader(rest, set(mapping))
            body = rest[:last + 1] + [release] + rest[last + 1:]
            if full is None:  # each tile's wait just before its first reader
                waits = {b: _call("tl::mbarrier_wait", _addr(fulls[b], (stage,)), phase)
                         for b in mapping}
                body = [w for i, it in enumerate(body)
                        for w in [waits[b] for b in mapping if first_reads[b] == i] + [it]]
            else:
                body = [_call("tl::mbarrier_wait", _addr(full, (stage,)), phase)] + body
            body = self._fence_after_reads(body, set(mapping), release)
            consumer_body = Rebuffer(mapping, stage).visit(rebuild(body))
            consumer_body = rebuild(outer_lets + [self._guarded(consumer_body, False)])
            consumer_loop = ir.For(k, start, n, "serial", consumer_body, 1, (), loc=loop.loc)
        rings = [(full, empty)] if full is not None else \
            [(fulls[b], empty if i == 0 else None) for i, b in enumerate(mapping)]
        producer, consumer, regs, tile_ring = self._roles(
            items, li, producer_loop, consumer_loop, n, list(mapping.values()), rings)

        where, tile_loads = self._nest_notes(tile_ring)
        note = (f"warp-specialised pipeline over {k.name}{where}: {S} stages, TMA loads of "
                f"{', '.join(p.src.name for p in plans)} ({total_bytes} B per "
                f"stage"
                + ("" if full is not None else ", one full barrier per tile, waited for before "
                   "its first reader: a short loop (at most "
                   f"{TILE_BARRIER_MAX_TRIPS} iterations) or tl.ws_tile_barriers")
                + f"), producer warpgroup + {T // 128} consumer warpgroup(s)"
                + _registers_note(regs) + tile_loads
                + (f"; {', '.join(b.name for b in computed)} double-buffered: computed while "
                   "the previous gemm runs" if computed else "")
                + (f"; {', '.join(p.src.name for p in plans if p.multicast)} multicast to the "
                   f"{self.cluster} blocks of a cluster" if self.cluster > 1 else "")
                + (f"; warp-specialised rather than the cp.async pipeline: "
                   f"{self.kept_because}" if self.kept_because else ""))
        return self._assemble(rings, S, producer, consumer, note)

    def _first_reads(self, rest, mapping, loop):
        """{stage tile: index in `rest` of its first reader} when each tile of a stage gets
        its own full barrier, else None: the consumers then wait once for the whole stage.
        With a barrier per tile, the first gemm of an iteration starts when its own operand
        has landed, while the loads of the later operands are still in flight (a
        FlashAttention forward's Q K^T before V arrives): in a loop of a few iterations that
        is a load's transfer time. Used where the loop is known to run at most
        `TILE_BARRIER_MAX_TRIPS` times (H200: attention-sink forward, 2 iterations, 10.2 ->
        9.7 µs), not on longer loops, where the extra waits cost more (a 32-iteration GQA
        forward 31.5 -> 33.5 µs, the attention backward kernels 1-3%); the pass config
        tl.ws_tile_barriers forces the choice either way."""
        forced = self.ctx.configs.get(PassConfigKey.TL_WS_TILE_BARRIERS.value)
        if forced is None:
            bound = self._trip_bound(loop)
            wanted = bound is not None and bound <= TILE_BARRIER_MAX_TRIPS
        else:
            wanted = self.ctx.flag(PassConfigKey.TL_WS_TILE_BARRIERS)
        if len(mapping) < 2 or self.cluster > 1 or not wanted:
            return None
        nodes = [it.value if isinstance(it, tuple) else it for it in rest]
        if any(any_node(n, lambda x: isinstance(x, ir.Buffer) and x.view_of in mapping)
               for n in nodes):
            return None  # a view of a tile: its readers are not found by name
        first = {}
        for b in mapping:
            at = [i for i, n in enumerate(nodes) if _mentions(n, b)]
            if not at:
                return None
            first[b] = at[0]
        if forced is None and len(set(first.values())) < 2:
            return None  # all first read by one statement (a GEMM's A and B): nothing gained
        return first

    def _single_stage(self, items, li, loop, plans, body_items):
        """`num_stages=1`: one buffer per tile, so a load can only overlap the computation on
        the other tiles. That needs tiles first read at different statements (FlashAttention's
        K by the first gemm, V by the second): each tile then gets its own one-slot ring,
        waited for just before its first reader and handed back just after its last, and the
        producer refills it while the consumers work on the rest of the iteration (K of k+1
        during the softmax and P V of k, V of k+1 during Q K^T of k+1). The cp.async loop of
        one stage waits for every load where it is issued. A loop whose tiles are all first
        read by one statement (a GEMM's A and B) gains nothing and keeps the plain loop."""
        tiles = {}
        for p in plans:
            tiles.setdefault(p.dst, []).append(p)
        plan_ids = {id(p.stmt) for p in plans}
        rest = [it for it in body_items if isinstance(it, tuple) or id(it) not in plan_ids]
        copy_at = {b: min(i for i, it in enumerate(body_items)
                          if any(it is p.stmt for p in ps)) for b, ps in tiles.items()}
        readers = {}
        for b in tiles:
            at = [i for i, it in enumerate(body_items) if id(it) not in plan_ids and
                  (_mentions(it.value, b) if isinstance(it, tuple) else _mentions(it, b))]
            if not at:
                return self._why(f"one stage and nothing in the loop reads {b.name}")
            if at[0] < copy_at[b]:
                return self._why(f"one stage and {b.name} is read before its copy in the "
                                 "loop body (the previous iteration's tile)")
            readers[b] = (at[0], at[-1])
        if len({first for first, _ in readers.values()}) < 2:
            return None  # one stage, every tile needed at once: nothing to overlap
        order = sorted(tiles, key=lambda b: readers[b][0])
        mapping = {b: self._multi_buffer(b, 1) for b in order}
        rings = {b: (self.ctx.add_scratch_shared(f"{b.name}_full", (1,), U64),
                     self.ctx.add_scratch_shared(f"{b.name}_empty", (1,), U64)) for b in order}
        k, start, n = loop.var, loop.start, loop.extent
        rel = ir.binary("sub", k, start)
        if self.nest:
            rel = self.nest.position(rel)
        slot, phase = slot_and_phase(rel, 1, counted=self.nest is not None)

        issue = []
        for b in order:
            full, empty = rings[b]
            issue += [_call("tl::mbarrier_wait", _addr(empty, (slot,)),
                            ir.binary("bitxor", phase, 1)),
                      _call("tl::mbarrier_arrive_expect_tx", _addr(full, (slot,)),
                            ir.const(sum(p.bytes for p in tiles[b])))]
            issue += [self._tma_loads(p, mapping, slot, full) for p in tiles[b]]
        producer_loop = ir.For(k, start, n, "serial", ir.Seq(tuple(issue)), loc=loop.loc)

        generic = self._read_generically(rest, set(order))
        body = []
        for i, it in enumerate(body_items):
            if id(it) in plan_ids and not isinstance(it, tuple):
                continue
            body += [_call("tl::mbarrier_wait", _addr(rings[b][0], (slot,)), phase)
                     for b in order if readers[b][0] == i]
            body.append(it)
            for b in order:
                if readers[b][1] == i:
                    if b in generic:  # see _fence_after_reads
                        body.append(_call("tl::fence_proxy_async"))
                    body.append(self._release(_addr(rings[b][1], (slot,)), (mapping[b],)))
        consumer_body = Rebuffer(mapping, slot).visit(rebuild(body))
        consumer_loop = ir.For(k, start, n, "serial", consumer_body, 1, (), loc=loop.loc)
        ring_pairs = [rings[b] for b in order]
        producer, consumer, regs, tile_ring = self._roles(
            items, li, producer_loop, consumer_loop, n, list(mapping.values()), ring_pairs)
        where, tile_loads = self._nest_notes(tile_ring)
        note = (f"warp-specialised single-stage loop over {k.name}{where}: one TMA ring per "
                f"tile ({', '.join(b.name for b in order)}), each refilled once its last reader "
                f"in the iteration is done, producer warpgroup + {self.T // 128} consumer "
                "warpgroup(s)" + _registers_note(regs)
                + tile_loads)
        return self._assemble(ring_pairs, 1, producer, consumer, note)

    def _run_count(self):
        """The ring position under a guard: how many iterations of the loop have run (in
        this tile and the earlier ones); each role counts the iterations it runs."""
        counter = self.nest.done if self.nest else ir.Buffer("pipe_done", (1,), ir.DType(
            "int32"), "local.var")
        if self.nest:
            self.nest.counted_in_loop = True
        self.run_counter = counter
        return ir.Load(counter, (ir.const(0),), counter.dtype)

    def _guarded(self, stage_work, with_lets=True):
        """`stage_work` of one iteration under the loop's guard, counting the iteration
        (the ring position of the next one that runs); unchanged without a guard. A skipped
        iteration touches no barrier, so producer and consumers, which skip alike, stay on
        the same ring positions and phases. `with_lets`: bind the loop-body lets the
        condition reads (the producer; the consumers keep the body's own lets)."""
        if not self.guard:
            return stage_work
        count = self.run_counter
        advance = ir.Store(count, (ir.const(0),), ir.binary(
            "add", ir.Load(count, (ir.const(0),), count.dtype), 1))
        out = ir.If(self.guard.cond, ir.Seq((stage_work, advance)), None, loc=self.guard.loc)
        if with_lets:
            out = rebuild(list(self.guard_lets) + [out])
        return out

    def _producer_computes_guard(self, items_before) -> bool:
        """Whether the producer warpgroup can evaluate the guard: the lets of the kernel it
        reads (through the loop-body lets) are ones the producer binds too (`_producer`, or
        the tile nest's)."""
        exprs = [self.guard.cond] + [let.value for let in self.guard_lets]
        if self.nest:
            return self.nest.producer_can_compute(exprs)
        params = {b for b in self.ctx.func.params if isinstance(b, ir.Buffer)}
        known = {it.var for it in items_before if isinstance(it, tuple)
                 and not (buffers_read(it.value) - params)}
        bound = set(let_values(self.kernel.body))
        return all(v in known or v not in bound or any(v is let.var for let in self.guard_lets)
                   for e in exprs for v in collect(e, lambda n: isinstance(n, ir.Var)))

    def _roles(self, items, li, producer_loop, consumer_loop, n, stage_buffers, rings):
        """(producer, consumer, register split, tile ring): the two loops inside the tile nest
        (if any), the producer's region, and the consumers' (the kernel's statements around
        their loop) with their register increase."""
        tile_ring = None
        if self.guard and not self.nest:  # each role's own count of the iterations run
            zero = ir.const(0, "int32")
            producer_loop = ir.Allocate(self.run_counter, producer_loop, zero)
            consumer_loop = ir.Allocate(self.run_counter, consumer_loop, zero)
        if self.nest:
            producer_loop, consumer_loop, tile_ring = self._in_nest(
                producer_loop, consumer_loop, n, stage_buffers, rings)
        producer, regs = self._producer(items[:li], producer_loop)
        consumer = rebuild(items[:li] + [consumer_loop] + items[li + 1:])
        if regs is not None:
            consumer = ir.Seq((_call(f"tl::setmaxnreg_inc<{regs[1]}>"), consumer))
        return producer, consumer, regs, tile_ring

    def _in_nest(self, producer_loop, consumer_loop, n, stage_buffers, rings):
        """(producer, consumer, tile ring or None): the two loops inside their copies of the
        tile nest, with the tile loads (_tile_plans) around them; `rings` gains the tile
        ring. The producer fills the stages of the next tile while the consumers finish this
        one, so nothing else may take the bytes of the stages, the tile buffers or their
        barriers after the loop (`ctx.pinned_shared`)."""
        tile_ring = self._tile_ring(self.tile_plans)
        producer_pre, consumer_post, replace = [], [], {}
        if tile_ring is not None:
            producer_pre, consumer_post, replace = self._tile_loads(tile_ring, consumer_loop)
            slot = self.nest.tile_ring_position(tile_ring[3])[0]
            consumer_loop = Rebuffer(tile_ring[0], slot).visit(consumer_loop)
            rings.append(tile_ring[1:3])
            stage_buffers = stage_buffers + list(tile_ring[0].values())
        self.ctx.pinned_shared.update(stage_buffers + [b for ring in rings for b in ring
                                       if b is not None])
        producer_loop, consumer_loop = self.nest.wrap(
            producer_pre + [producer_loop], [consumer_loop] + consumer_post, n, replace)
        return producer_loop, consumer_loop, tile_ring

    def _nest_notes(self, tile_ring):
        """(where the loop sits, what the producer loads per tile) for the verbose note."""
        if not self.nest:
            return "", ""
        loads = (f"; the producer also loads {', '.join(p.src.name for p in self.tile_plans)}"
                 f" once per tile ({tile_ring[3]} buffer(s))" if tile_ring else "")
        return f" (inside {self.nest.describe()})", loads

    def _tile_loads(self, tile_ring, consumer_loop):
        """(producer statements before its loop, consumer statements after theirs, the
        consumers' copies to replace) for the tile loads: the producer waits for the tile's
        buffer to be free and loads it; the consumers wait for it where their copy was and
        hand it back after the pipelined loop, its only reader."""
        mapping, full, empty, depth = tile_ring
        slot, phase = self.nest.tile_ring_position(depth)
        issue = [_call("tl::mbarrier_wait", _addr(empty, (slot,)), ir.binary("bitxor", phase, 1)),
                 _call("tl::mbarrier_arrive_expect_tx", _addr(full, (slot,)),
                       ir.const(sum(p.bytes for p in self.tile_plans)))]
        issue += [self._tma_loads(p, mapping, slot, full) for p in self.tile_plans]
        wait = _call("tl::mbarrier_wait", _addr(full, (slot,)), phase)
        replace = {id(p.stmt): wait for p in self.tile_plans[:1]}
        replace.update({id(p.stmt): None for p in self.tile_plans[1:]})
        post = [self._release(_addr(empty, (slot,)))]
        if self._read_generically([consumer_loop], set(mapping)):
            post.insert(0, _call("tl::fence_proxy_async"))  # see _fence_after_reads
        return [ir.Seq(tuple(issue))], post, replace

    def _double_buffered(self, loop, S, full, empty, mapping, rest, computed):
        """The consumer loop unrolled by two, odd iterations on second copies of the
        `computed` tiles (computed_operands.py): the tile of iteration k+1 is computed while
        the gemm of iteration k runs; the ring stage of iteration k-1 is handed back once the
        gemm of k-1 is complete, at the barrier that publishes the tile of k."""
        k, start, n = loop.var, loop.start, loop.extent
        rel = ir.binary("sub", k, start)
        stage = ir.binary("floormod", rel, S)
        phase = ir.binary("floormod", ir.binary("floordiv", rel, S), 2)
        prev = ir.binary("floormod", ir.binary("sub", rel, 1), S)
        release_prev = ir.If(ir.compare("gt", k, start), self._release(_addr(empty, (prev,))),
                             None)
        body = publish_then_issue(rest, computed, release_prev)
        even = ir.Seq((_call("tl::mbarrier_wait", _addr(full, (stage,)), phase),
                       Rebuffer(mapping, stage).visit(rebuild(body))))
        second = {b: self._second_copy(b) for b in computed}
        odd = swap_buffers(substitute(even, {k: ir.binary("add", k, 1)}), second)
        pairs = ir.For(k, start, ir.binary("floordiv", n, 2), "serial", ir.Seq((even, odd)), 2,
                       (), loc=loop.loc)
        if ir.int_value(n) is not None and ir.int_value(n) % 2 == 0:
            return pairs
        # the last iteration of an odd trip count; a loop (of 0 or 1 iterations) like the
        # pairs, so every gemm stays in a loop (stage_epilogue.py looks for the main loop)
        paired = ir.binary("mul", ir.binary("floordiv", n, 2), 2)
        last = ir.For(k, ir.binary("add", start, paired), ir.binary("floormod", n, 2), "serial",
                      even, 1, (), loc=loop.loc)
        return ir.Seq((pairs, last))

    def _release(self, bar, tiles=None):
        """The consumers handing a stage back: every thread arrives, or with multicast one
        lane per warp arrives on the barrier of every block of the cluster (after its warp).
        With `tiles` (the stage buffers) the arrival is marked ("releases", tiles), so that
        wgmma_wait.py moves it after the wait for a gemm still reading them."""
        name = f"tl::mbarrier_arrive_cluster<{self.cluster}>" if self.cluster > 1 else \
            "tl::mbarrier_arrive"
        if tiles is None:
            return _call(name, bar)
        return ir.Evaluate(ir.Call("call_extern", (name, bar), VOID, (("releases", tiles),)))

    def _read_generically(self, stmts, buffers) -> set:
        """The `buffers` that `stmts` read other than as wgmma operands."""
        out = set()
        for st in stmts:
            if isinstance(st, tuple):  # a let: its value may load from a stage
                out.update(b for b in buffers if _mentions(st.value, b))
                continue
            for g in collect(st, lambda n: isinstance(n, ir.Gemm)):
                if not self.ctx.is_wgmma(g):  # mma.sync: ldmatrix reads
                    out.update(r.buffer for r in g.operands() if r.buffer in buffers)
            rest = _without_gemms(st)  # wgmma reads shared operands through the async proxy
            out.update(b for b in buffers if _mentions(rest, b))
        return out

    def _fence_after_reads(self, items, buffers, release=None) -> list:
        """`items` with a proxy fence after the last one that reads a stage with ordinary
        loads (ld.shared, ldmatrix: not only through wgmma). The TMA load that next fills the
        stage is an async-proxy write, which the consumers' arrival does not order after
        generic-proxy reads (without the fence a persistent GEMM whose A went through
        registers read tiles already overwritten). Right after the reads the fence costs
        little; at the hand-back it measured 2% on the MHA backward kernel.
        Experiment `no_consumed_release_fence` (off: the fence stays): none where every such
        read is consumed by a wgmma issued before the arrival `release`
        (analysis/consumed_loads.py). It gained 3-10% on the attention backward kernels
        (H200) but drops the fence of fuzz seed 734's persistent GEMM (A through registers
        into wgmma_rs), the program whose wrong results (a third of C) brought the fence in;
        until a GPU run shows that program right without it, the fence stays."""
        last = max((i for i, it in enumerate(items)
                    if self._read_generically([it], buffers)), default=None)
        if last is None:
            return items
        if release is not None and "no_consumed_release_fence" in env.experiments \
                and any(it is release for it in items):
            end = next(i for i, it in enumerate(items) if it is release)
            if last < end and loads_consumed_by_wgmma(
                    items, end, lambda it: bool(self._read_generically([it], buffers)),
                    self.ctx.is_wgmma):
                self.ctx.note("warp_specialize: no proxy fence before the stage hand-back "
                              "(every ordinary load of the stage feeds a wgmma issued first)")
                return items
        return items[:last + 1] + [_call("tl::fence_proxy_async")] + items[last + 1:]

    def _second_copies_fit(self, computed) -> bool:
        computed = [b for b in computed if b.scope in SHARED]
        if not computed:
            return True  # copies in registers take no shared memory
        allocs = [self.ctx.replaced_shared.get(b, b) for b in self.kernel.allocs] + computed
        return arena_bytes(self.ctx, allocs) + 1024 <= smem_limit(self.ctx.target.sm)

    def _second_copy(self, b: ir.Buffer) -> ir.Buffer:
        nb = ir.Buffer(f"{b.name}_odd", b.shape, b.dtype, b.scope, loc=b.loc)
        self.ctx.layouts[nb] = self.ctx.layouts[b]
        self.extra_allocs.append(nb)
        return nb

    def _assemble(self, rings, S, producer, consumer, note):
        """The kernel: mbarrier initialisation (`rings`: (full, empty) pairs of S barriers),
        then the producer and consumer regions."""
        ctx, T, tid = self.ctx, self.T, self.ctx.tid
        s = ir.Var("s")
        inits = []
        releases = T if self.cluster == 1 else T // 32 * self.cluster
        if self.cluster > 1:
            # a peer still arrives on our empty barriers after our last use of them: nothing
            # (a staged epilogue in the dead stage buffers) may reuse their bytes
            ctx.pinned_shared.update(b for ring in rings for b in ring if b is not None)
        for size in sorted({full.shape[0] for full, _ in rings}, reverse=True):
            body = []
            for full, empty in rings:
                if full.shape[0] == size:
                    body.append(_call("tl::mbarrier_init", _addr(full, (s,)), ir.const(1)))
                    if empty is not None:  # tiles of one stage share its empty barrier
                        body.append(_call("tl::mbarrier_init", _addr(empty, (s,)),
                                          ir.const(releases)))
            inits.append(ir.For(s, ir.const(0), ir.const(size), "unroll", ir.Seq(tuple(body))))
        init = ir.If(ir.compare("eq", tid, 0), ir.Seq((
            *inits,
            _call("tl::fence_mbarrier_init"),
            _call("tl::fence_proxy_async"),
        )), None)
        split = ir.If(ir.compare("ge", tid, T),
                      ir.Attr("thread_group", ("producer", PRODUCER_THREADS), producer),
                      ir.Attr("thread_group", ("consumer", T), consumer))
        if self.cluster > 1:
            # every block's barriers exist before a peer signals them, and no block exits
            # while a peer may still signal it
            body = ir.Seq((init, _call("tl::cluster_sync"), split, _call("tl::cluster_sync")))
        else:
            body = ir.Seq((init, _call("__syncthreads"), split))
        threads = (T + PRODUCER_THREADS,) if len(self.kernel.threads) == 1 else None
        if threads is None:
            return self._why("multi-dimensional thread blocks")
        allocs = tuple(ctx.replaced_shared.get(b, b) for b in self.kernel.allocs) + \
            tuple(self.extra_allocs)
        attrs = self.kernel.attrs + (("warp_specialized", (T, PRODUCER_THREADS)),)
        ctx.note(note)
        return ir.with_fields(self.kernel, body=body, threads=threads, allocs=allocs,
                              attrs=attrs)

    def _build_overlapped(self, items, li, loop, S, plans, slots):
        """The consumer runs the order/stage schedule (overlap_schedule.py): pass t of the loop
        runs each slot for iteration t - stage, in order; a prologue and an epilogue of `D`
        (the deepest stage) passes, guarded by the trip count, start and drain it. Every
        shared tile the producer fills has its own mbarrier ring, waited for before the first
        slot that reads it and released after the last one (the release carries
        ("releases", tile) so wgmma_wait.py may move it after the wait for a gemm still
        reading the tile). wgmma gemms of the schedule are issued without waiting (wg_wait=-1);
        wgmma_wait.py waits for each where its result is next needed."""
        ctx, T = self.ctx, self.T
        mapping, rings = {}, {}
        for p in plans:
            b = p.dst
            if b not in mapping:
                mapping[b] = self._multi_buffer(b, S)
                rings[b] = (ctx.add_scratch_shared(f"{b.name}_full", (S,), U64),
                            ctx.add_scratch_shared(f"{b.name}_empty", (S,), U64), [])
            rings[b][2].append(p)
        k, start, n = loop.var, loop.start, loop.extent
        D = depth(slots)

        def ring_position(rel):
            if self.nest:
                return slot_and_phase(self.nest.position(rel), S, counted=True)
            return slot_and_phase(rel, S, counted=False)

        def slot_of(rel):
            return ring_position(rel)[0]

        def phase_of(rel):
            return ring_position(rel)[1]

        # producer: iteration by iteration, each tile on its own ring
        rel = ir.binary("sub", k, start)
        issue = []
        for b, (full, empty, ps) in rings.items():
            issue += [_call("tl::mbarrier_wait", _addr(empty, (slot_of(rel),)),
                            ir.binary("bitxor", phase_of(rel), 1)),
                      _call("tl::mbarrier_arrive_expect_tx", _addr(full, (slot_of(rel),)),
                            ir.const(sum(p.bytes for p in ps)))]
            issue += [self._tma_loads(p, mapping, slot_of(rel), full) for p in ps]
        producer_loop = ir.For(k, start, n, "serial", ir.Seq(tuple(issue)), loc=loop.loc)

        # consumers
        def async_gemms(st):
            if ctx.is_wgmma(st) and st.wg_wait == 0:
                return ir.with_fields(st, wg_wait=-1)
            return st

        stmts = {id(sl): async_gemms(sl.stmt) for sl in slots}
        generic = self._read_generically([sl.stmt for sl in slots], set(rings))
        readers = {b: [sl for sl in slots if b in touched_buffers(sl.stmt)] for b in rings}
        first = {b: min(r, key=lambda sl: (sl.stage, sl.key)) for b, r in readers.items()}
        last = {b: max(r, key=lambda sl: (sl.stage, sl.key)) for b, r in readers.items()}

        def instance(sl, rel):
            """Slot `sl` for iteration start + rel, with its ring waits and releases."""
            stmt = substitute(stmts[id(sl)], {k: ir.binary("add", start, rel)})
            out = [_call("tl::mbarrier_wait", _addr(rings[b][0], (slot_of(rel),)),
                         phase_of(rel)) for b in rings if first[b] is sl]
            out.append(Rebuffer(mapping, slot_of(rel)).visit(stmt))
            for b in rings:
                if last[b] is sl:
                    if b in generic:  # see _fence_after_reads
                        out.append(_call("tl::fence_proxy_async"))
                    arrive = ir.Call("call_extern", ("tl::mbarrier_arrive", _addr(
                        rings[b][1], (slot_of(rel),))), VOID, (("releases", (mapping[b],)),))
                    out.append(ir.Evaluate(arrive))
            return out

        in_pass = sorted(slots, key=lambda sl: sl.key)
        parts = []
        # prologue: passes 0..D-1 run the slots whose iteration has started and exists
        for p in range(D):
            for sl in in_pass:
                if sl.stage <= p:
                    r = p - sl.stage
                    parts.append(ir.If(ir.compare("lt", ir.const(r), n),
                                       ir.Seq(tuple(instance(sl, ir.const(r)))), None))
        steady = []
        for sl in in_pass:
            steady += instance(sl, ir.binary("sub", ir.binary("sub", k, start), sl.stage))
        parts.append(ir.For(k, ir.binary("add", start, D), ir.binary("sub", n, D), "serial",
                            ir.Seq(tuple(steady)), 1, (), loc=loop.loc))
        # epilogue: passes n..n+D-1 finish the last iterations (not before pass D: a loop
        # shorter than the prologue finished them there)
        for e in range(D):
            body = []
            for sl in in_pass:
                if sl.stage > e:
                    body += instance(sl, ir.binary("sub", ir.binary("add", n, e), sl.stage))
            parts.append(ir.If(ir.compare("ge", ir.binary("add", n, e), D),
                               ir.Seq(tuple(body)), None))
        consumer_loop = _merge_guards(parts)
        ring_pairs = [(f, e) for f, e, _ in rings.values()]
        producer, consumer, regs, tile_ring = self._roles(
            items, li, producer_loop, consumer_loop, n, list(mapping.values()), ring_pairs)
        order = ", ".join(f"{sl.pos}@{sl.stage}" for sl in in_pass)
        where, tile_loads = self._nest_notes(tile_ring)
        note = (f"warp-specialised overlapped pipeline over {k.name}{where}: {S} stages, "
                f"schedule (statement@stage) {order}; TMA rings for "
                f"{', '.join(b.name for b in rings)}, producer warpgroup + {T // 128} consumer "
                f"warpgroup(s)" + _registers_note(regs)
                + tile_loads)
        return self._assemble(ring_pairs, S, producer, consumer, note)

    def _register_split(self):
        total = self.T + PRODUCER_THREADS
        cap = min(255, 65536 // total) // 8 * 8
        producer = 40 if total <= 384 else 24
        consumer = ((cap * total - PRODUCER_THREADS * producer) // self.T) // 8 * 8
        consumer = min(240, consumer)
        if consumer <= cap or self.ctx.flag(PassConfigKey.TL_DISABLE_WARP_SPECIALIZED):
            return None
        return producer, consumer

    def _tma_loads(self, p, mapping, stage, full):
        ctx = self.ctx
        g = p.src
        name = f"{g.name}_desc" + (f"_{len(ctx.tma_descriptors)}" if any(
            d.buffer is g for d in ctx.tma_descriptors) else "")
        if isinstance(p, Im2colPlan):
            box, im2col = p.descriptor_args()
            desc = TmaDescriptor(name, g, box, p.swizzle, im2col=im2col)
        elif p.multicast:
            d, cs = p.multicast
            box = list(p.box)
            box[d] //= cs
            desc = TmaDescriptor(name, g, tuple(box), p.swizzle)
        else:
            desc = TmaDescriptor(name, g, p.box, p.swizzle)
        desc.param = ir.Var(name, ir.DType("handle"))
        ctx.tma_descriptors.append(desc)
        dst = mapping[p.dst]
        param = ir.Call("address_of_param", (desc.param,), ir.DType("handle"))
        if isinstance(p, Im2colPlan):
            body = p.load(param, _addr(full, (stage,)), _addr(dst, [stage, 0, 0]))
            for let in reversed(p.deps):
                body = ir.LetStmt(let.var, let.value, body, loc=let.loc)
            return body
        starts = [ir.as_expr(x) for x in p.copy.src.starts]
        stmts = []
        for blk in range(p.n_blocks):
            coords = list(starts)
            coords[-1] = ir.binary("add", coords[-1], blk * p.block_elems)
            tile_idx = [stage] + [0] * (len(dst.shape) - 2) + [blk * p.block_elems]
            if len(dst.shape) == 2:
                tile_idx = [stage, blk * p.block_elems]
            if p.multicast:  # this block's slice of rows, into every block of the cluster
                d, cs = p.multicast
                first = ir.binary("mul", ir.Call("call_extern", ("tl::cluster_ctarank",),
                                                 ir.DType("int32")), p.box[d] // cs)
                coords[d] = ir.binary("add", coords[d], first)
                stmt = _call("tl::tma_load_multicast", param, _addr(full, (stage,)),
                             _addr(dst, [stage, first, blk * p.block_elems]),
                             ir.const((1 << cs) - 1), *reversed(coords))
            else:
                stmt = _call("tl::tma_load", param, _addr(full, (stage,)), _addr(dst, tile_idx),
                             *reversed(coords))
            stmts.append(stmt)
        body = ir.Seq(tuple(stmts))
        for let in reversed(p.deps):
            body = ir.LetStmt(let.var, let.value, body, loc=let.loc)
        return body


def _registers_note(regs) -> str:
    """The register split of `setmaxnreg`, as the notes say it."""
    if not regs:
        return ""
    return (f", setmaxnreg {regs[0]}/{regs[1]} (registers a thread: the producer only "
            f"issues TMA, the consumers hold the accumulators)")


def _merge_guards(parts):
    """Adjacent `if c: ...` with the same condition become one branch (prologue passes)."""
    out = []
    for p in parts:
        if out and isinstance(p, ir.If) and isinstance(out[-1], ir.If) and \
                p.else_body is None and out[-1].else_body is None and \
                ir.structural_equal(p.cond, out[-1].cond):
            out[-1] = ir.If(p.cond, ir.Seq(_stmts(out[-1].then_body) + _stmts(p.then_body)),
                            None)
        else:
            out.append(p)
    return ir.Seq(tuple(out))


def _stmts(s):
    return s.stmts if isinstance(s, ir.Seq) else (s,)


def _last_reader(items, buffers) -> int:
    """Index of the last of `items` (statements and lets) that names one of `buffers`; the
    last item when a view (T.view, T.reshape) of one of them appears anywhere."""
    nodes = [it.value if isinstance(it, tuple) else it for it in items]
    if any(any_node(n, lambda x: isinstance(x, ir.Buffer) and x.view_of in buffers)
           for n in nodes):
        return len(items) - 1
    return max((i for i, it in enumerate(items)
                if any(_mentions(it.value if isinstance(it, tuple) else it, b) for b in buffers)),
               default=len(items) - 1)


def _without_gemms(node):
    class Drop(Mutator):
        def visit_Gemm(self, g):
            return ir.Seq(())

    return Drop().visit(node)


def _mentions(node, buf) -> bool:
    return any_node(node, lambda n: (isinstance(n, (ir.Load, ir.Store)) and n.buffer is buf)
                        or (isinstance(n, ir.BufferRegion) and n.buffer is buf))


def warp_specialize(kernel: ir.Kernel, ctx) -> ir.Kernel:
    out = WarpSpecializer(kernel, ctx).run()
    return kernel if out is None else out

