"""Lower global→shared `T.copy` into per-thread vector copies (cp.async when asynchronous) and
`T.tma_copy` into TMA instructions (transform/lower_copy/lower_tma_copy.py). Runs after tma_reduce
(`T.atomic_add(..., use_tma=True)`) and stage_epilogue (GEMM epilogues staged through shared
memory), whose copies it lowers too (engine/pipeline.py).

Expects: `Copy` nodes with a global source and a shared destination (all other copies are
parallel loops by now), the destination's layout in `ctx.layouts`. A copy marked
("async", True) by the pipeliner issues cp.async without waiting; an unmarked one issues
cp.async and waits for it (or plain vector loads when cp.async does not apply); consecutive
unmarked loads into other tiles, or into provably disjoint parts of one tile (then one
("partitioned") statement for the barrier pass), share the last one's wait.

Guarantees: each thread moves whole V-element chunks (V*elem bytes in {16, 8, 4}), chunk c of
the tile going to thread c % T; elements outside the global tensor read as zero (cp.async
src-size / predicated loads), so ragged edges are exact. V is the widest width the alignment
of the global row stride, the region start and the shared layout allow; 1 falls back to
element copies through a parallel loop. On sm_90a a shared -> global copy (its loop nest,
`store_copy`) becomes a TMA store where TMA can do it (copy_tma.py), also inside a role's
thread group (the role's first thread issues it after the role's barrier: the sparse MLA
forward's epilogue, 16 element-wise stores a thread before).
"""

from __future__ import annotations

from ...arith import Analyzer
from ...errors import located
from ...ir import nodes as ir
from ...layout import row_major
from ...ir.thread_range import InRoleGroups, has_user_roles
from ..analysis.device_ops import copy_vec_name
from ..analysis.loop_items import copy_oob_value
from ..analysis.indices import Widen, wide_indices
from ..analysis.scoped import ScopedMutator
from ..analysis.tile_loops import STORE_COPY, copy_as_loop, non_unit_extents
from ..analysis.tma_plan import rows_16_byte_aligned
from ..pass_config import PassConfigKey
from .copy_tma import PREFER_TMA, tma_load, tma_store
from .lower_tma_copy import lower_tma_copy

INT = ir.DType("int32")


def _vector_width(s: ir.Copy, ctx, analyzer: Analyzer) -> int:
    src, dst = s.src, s.dst
    esize = src.buffer.dtype.bytes
    if src.buffer.dtype is not dst.buffer.dtype or esize > 16 or src.buffer.dtype.bits < 8:
        return 1
    s_ext = [e for e in src.extents]
    d_ext = [e for e in dst.extents]
    inner_s, inner_d = ir.int_value(s_ext[-1]), ir.int_value(d_ext[-1])
    if inner_s is None or inner_d is None or inner_s != inner_d or inner_s == 1:
        return 1
    gstrides = src.buffer.effective_strides()
    if not (isinstance(gstrides[-1], int) and gstrides[-1] == 1):
        return 1
    layout = ctx.layouts.get(dst.buffer)
    for width in (16, 8, 4):
        V = width // esize
        if V < 1 or inner_s % V:
            continue
        # global: every row start and the region's inner start are multiples of V
        ok = all(analyzer.is_divisible(ir.as_expr(st), V) for st in gstrides[:-1]
                 if not isinstance(st, int)) and all(st % V == 0 for st in gstrides[:-1]
                                                     if isinstance(st, int))
        ok = ok and analyzer.is_divisible(ir.as_expr(src.starts[-1]), V)
        # shared: a chunk must stay contiguous and aligned in the physical layout
        ok = ok and analyzer.is_divisible(ir.as_expr(dst.starts[-1]), V)
        if ok and layout is not None:
            ok = layout.vector_width(16 // esize) % V == 0 if hasattr(layout, "vector_width") \
                else True
        if ok:
            return V
    return 1


def _provably_inside(s: ir.Copy, analyzer: Analyzer) -> bool:
    """Whether every element of the copy's source region lies inside its tensor."""
    for (start, extent), n in zip(s.src.region, s.src.buffer.shape):
        last = ir.binary("sub", ir.binary("add", start, extent), 1)
        if not (analyzer.prove(ir.compare("ge", start, 0)) and
                analyzer.prove(ir.compare("lt", last, n))):
            return False
    return True


def lower_global_to_shared(s: ir.Copy, ctx, analyzer: Analyzer, oob_value=None) -> ir.Stmt:
    """`oob_value`: what the source reads outside its tensor, when not 0 (copy_oob_value)."""
    V = _vector_width(s, ctx, analyzer)
    is_async = dict(s.options).get("async", False)
    # tl.enable_async_copy / tir.use_async_copy = False: a synchronous copy is plain vector
    # loads and stores (a copy the pipeliner issues ahead stays cp.async)
    use_cp_async = ctx.target.sm >= 80 and V * s.src.buffer.dtype.bytes in (4, 8, 16) and (
        is_async or (ctx.flag(PassConfigKey.TL_ENABLE_ASYNC_COPY, True) and
                     ctx.flag(PassConfigKey.TIR_USE_ASYNC_COPY, True)))
    # a copy in a user role is performed by the role's threads (transform/warp_roles.py)
    in_role = dict(s.options).get("thread_range")
    T, tid = in_role if in_role is not None else (ctx.num_threads, ctx.tid)
    src, dst = s.src, s.dst
    extents = [ir.int_value(e) for e in non_unit_extents(src)]
    if V == 1 or any(e is None for e in extents):
        # a T.Parallel nest: partition_parallel spreads it over the block's (or the role's)
        # threads with vector loads where it can
        return copy_as_loop(s)
    if oob_value is not None and not _provably_inside(s, analyzer):
        # cp.async and copy_zfill fill zeros outside the tensor: element loads read the
        # annotated value instead (guard_global, or the copy's own select)
        return copy_as_loop(s)
    chunk_ext = extents[:-1] + [extents[-1] // V]
    total = 1
    for e in chunk_ext:
        total *= e
    trips = -(-total // T)
    c = ir.Var("c")
    chunk = ir.binary("add", ir.binary("mul", c, T), tid) if trips > 1 else tid
    idx, rest = [], chunk
    for e in reversed(chunk_ext):
        idx.append(ir.binary("floormod", rest, e) if e != total else rest)
        rest = ir.binary("floordiv", rest, e)
        total //= e
    idx = list(reversed(idx))
    idx[-1] = ir.binary("mul", idx[-1], V)
    src_index = _region_index(src, idx)
    dst_index = _region_index(dst, idx)
    esize = src.buffer.dtype.bytes
    bytes_ = V * esize
    gbuf = src.buffer
    if wide_indices(gbuf, ctx):
        # the bounds below are computed from these indices: int64 from the leaves up, or a
        # dimension of 2^31+ elements overflows them (widen_indices only rewrites accesses)
        src_index = [Widen().visit(ir.as_expr(i)) for i in src_index]
    # bounds: outer dims must be in range; the inner dim gives the number of valid elements
    conds = []
    for d, (i, n) in enumerate(zip(src_index, gbuf.shape)):
        if d == len(src_index) - 1:
            continue
        conds.append(ir.logical_and(ir.compare("ge", i, 0), ir.compare("lt", i, n)))
    inner_i, inner_n = src_index[-1], gbuf.shape[-1]
    valid = ir.binary("min", ir.binary("max", ir.binary("sub", inner_n, inner_i), 0), V)
    row_ok = None
    for cnd in conds:
        row_ok = cnd if row_ok is None else ir.logical_and(row_ok, cnd)
    with analyzer.scope():
        if trips > 1:
            analyzer.bind(c, 0, trips)  # the proofs hold for every chunk a thread copies
        inner_ge0 = analyzer.prove(ir.compare("ge", inner_i, 0))
        full_inner = inner_ge0 and analyzer.prove(
            ir.compare("le", ir.binary("add", inner_i, V), inner_n))
        # a row length and chunk start that are multiples of V (a dynamic size specialised
        # on alignment: 8 * k_div8) leave each chunk wholly in or wholly out: a predicate,
        # not a byte count clamped to [0, V]
        whole_chunks = not full_inner and analyzer.is_divisible(
            ir.binary("sub", inner_n, inner_i), V)
        if row_ok is not None and analyzer.prove(row_ok):
            row_ok = None
    if whole_chunks:
        inside = ir.compare("lt", inner_i, inner_n)
        if not inner_ge0:
            inside = ir.logical_and(ir.compare("ge", inner_i, 0), inside)
        row_ok = inside if row_ok is None else ir.logical_and(row_ok, inside)
    if full_inner or whole_chunks:
        src_bytes = None
    else:
        src_bytes = ir.binary("mul", valid, esize)
    if row_ok is not None:
        src_bytes = ir.select(row_ok, src_bytes if src_bytes is not None else ir.const(bytes_),
                              ir.const(0))
    nbytes = None
    if src_bytes is not None:
        # out-of-range chunks read nothing; keep their address inside the tensor
        nbytes = ir.Var("nbytes")
        some = ir.compare("gt", nbytes, 0)
        src_index = [ir.select(some, i, 0) for i in src_index]
    src_ptr = ir.Call("address_of", (ir.Load(gbuf, tuple(src_index), gbuf.dtype),),
                      ir.DType("handle"))
    dst_ptr = ir.Call("address_of", (ir.Load(dst.buffer, tuple(dst_index), dst.buffer.dtype),),
                      ir.DType("handle"))
    if use_cp_async:
        attrs = (("async", True),) if is_async else ()
        if src_bytes is None:
            call = ir.Call("call_extern", (f"tl::cp_async<{bytes_}>", dst_ptr, src_ptr),
                           ir.DType("void"), attrs)
        else:
            call = ir.Call("call_extern", (f"tl::cp_async_zfill<{bytes_}>", dst_ptr, src_ptr,
                                           nbytes), ir.DType("void"), attrs)
    elif nbytes is None:  # every chunk whole
        call = ir.Call("call_extern", (copy_vec_name(bytes_, gbuf.dtype), dst_ptr, src_ptr),
                       ir.DType("void"))
    else:
        call = ir.Call("call_extern", (f"tl::copy_zfill<{V}>", dst_ptr, src_ptr,
                                       ir.binary("floordiv", nbytes, esize)), ir.DType("void"))
    body = ir.Evaluate(call, loc=s.loc)
    if nbytes is not None:
        body = ir.LetStmt(nbytes, ir.cast_to(src_bytes, INT), body, loc=s.loc)
    if trips * T != _prod(chunk_ext):
        body = ir.If(ir.compare("lt", chunk, _prod(chunk_ext)), body, None, loc=s.loc)
    stmt = body if trips == 1 else ir.For(c, ir.const(0), ir.const(trips), "unroll", body,
                                          loc=s.loc)
    if use_cp_async and not is_async:
        wait = [ir.Evaluate(ir.Call("call_extern", ("tl::cp_async_commit",), ir.DType("void"))),
                ir.Evaluate(ir.Call("call_extern", ("tl::cp_async_wait<0>",), ir.DType("void")))]
        stmt = ir.Seq((stmt,) + tuple(wait))
    return stmt


def _waits_for_itself(lowered) -> bool:
    """Whether a lowered copy is a synchronous cp.async: issue, commit, wait<0> (or such
    copies issued together as one statement, below)."""
    if isinstance(lowered, ir.Attr) and lowered.key == "partitioned":
        return _waits_for_itself(lowered.body)
    return isinstance(lowered, ir.Seq) and len(lowered.stmts) >= 2 and \
        ir.calls_extern(lowered.stmts[-1], "tl::cp_async_wait<0>") and \
        ir.calls_extern(lowered.stmts[-2], "tl::cp_async_commit")


def _without_wait(lowered):
    """A synchronous copy (`_waits_for_itself`) without its final wait<0>; its commit stays."""
    if isinstance(lowered, ir.Attr):
        return ir.with_fields(lowered, body=_without_wait(lowered.body))
    return ir.Seq(lowered.stmts[:-1])


def _issued_together(first, second, first_lowered, second_lowered, analyzer) -> bool:
    """Whether the wait of synchronous copy `first` may move to the wait of the synchronous
    copy right after it: `second` reads global memory only and writes another tile (or
    another part of the same tile), so its issue needs nothing from `first`, and its wait<0>
    waits for both. Consecutive tile loads (a FlashAttention backward's K and V, the two
    column ranges of the sparse MLA backward's Q tile) then take one memory latency, not one
    each."""
    return isinstance(first, ir.Copy) and isinstance(second, ir.Copy) and \
        (first.dst.buffer is not second.dst.buffer or
         _disjoint(first.dst, second.dst, analyzer)) and \
        second.src.buffer.scope == "global" and \
        _waits_for_itself(first_lowered) and _waits_for_itself(second_lowered)


def _flat(lowered) -> tuple:
    """The statements of a lowered synchronous copy (one issued together included)."""
    if isinstance(lowered, ir.Attr):
        return _flat(lowered.body)
    return lowered.stmts


def _disjoint(a: ir.BufferRegion, b: ir.BufferRegion, analyzer) -> bool:
    """Whether two regions of one buffer provably share no element (apart along some dim)."""
    for (sa, ea), (sb, eb) in zip(a.region, b.region):
        end_a, end_b = ir.binary("add", sa, ea), ir.binary("add", sb, eb)
        if analyzer.prove(ir.compare("le", end_a, sb)) or \
                analyzer.prove(ir.compare("le", end_b, sa)):
            return True
    return False


def _prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def _region_index(region: ir.BufferRegion, idx):
    it = iter(idx)
    out = []
    for start, extent in region.region:
        if ir.int_value(extent) == 1:
            out.append(ir.as_expr(start))
        else:
            out.append(ir.binary("add", start, next(it)))
    return out


def _innermost(s):
    while isinstance(s, ir.For):
        s = s.body
    return s


class _Lower(InRoleGroups, ScopedMutator):
    def __init__(self, ctx, analyzer, kernel):
        super().__init__(analyzer)
        self.ctx = ctx
        self.kernel = kernel
        self.loops = 0  # enclosing loops: a TMA load's barrier phase changes per execution
        self.user_roles = has_user_roles(kernel)
        self.barriers = []  # the mbarriers of TMA loads (copy_tma.py), one per copy
        self.phases = []  # their phase registers (copies inside loops)

    def _block_level(self) -> bool:
        return self.ctx.group is None and not self.user_roles

    def _whole_group(self) -> bool:
        """Every thread of the block, or of the role whose statements are being lowered (a
        `thread_group` region: its barriers are the role's named barrier, `ctx.tid` counts
        its threads from 0), runs the statement: a default TMA store can elect its issuer."""
        return self.ctx.group is not None or not self.user_roles

    def visit_Copy(self, s: ir.Copy):
        if dict(s.options).get(ir.PREFER_INSTRUCTION) == "tma" and \
                not dict(s.options).get("async", False):
            return self._tma_load(s)
        return lower_global_to_shared(s, self.ctx, self.analyzer,
                                      copy_oob_value(self.kernel, s))

    def visit_Seq(self, s: ir.Seq):
        out = [self.visit(x) for x in s.stmts]
        for i in range(len(out) - 1):
            first, second = s.stmts[i], s.stmts[i + 1]
            if not _issued_together(first, second, out[i], out[i + 1], self.analyzer):
                continue
            if first.dst.buffer is second.dst.buffer:
                # one statement for the barrier pass: disjoint parts of one tile written by
                # copies no thread reads in between need no barrier between them
                both = _flat(_without_wait(out[i])) + _flat(out[i + 1])
                out[i + 1] = ir.Attr("partitioned", True, ir.Seq(both), loc=second.loc)
                out[i] = ir.Seq(())
            else:
                out[i] = _without_wait(out[i])  # the next wait covers it
        if all(a is b for a, b in zip(out, s.stmts)):
            return s
        return ir.Seq(tuple(x for x in out if not (isinstance(x, ir.Seq) and not x.stmts)))

    def visit_TmaCopy(self, s: ir.TmaCopy):
        return lower_tma_copy(s, self.ctx, self.analyzer)

    def _tma_load(self, s: ir.Copy) -> ir.Stmt:
        if not self._block_level():
            raise located(NotImplementedError)(
                f'{PREFER_TMA} inside a role or thread-range branch is not supported here; '
                "use T.tma_copy with a barrier of your own", s.loc)
        bar = ir.Buffer(f"{s.src.buffer.name}_{s.dst.buffer.name}_tma_bar{len(self.barriers)}",
                        (1,), ir.DType("uint64"), "shared.dyn", loc=s.loc)
        phase = ir.Buffer(f"{bar.name}_phase", (1,), INT, "local.var", loc=s.loc)
        current = ir.Load(phase, (ir.const(0),), INT) if self.loops else ir.const(0)
        load = tma_load(s, self.ctx, self.analyzer, bar, current)
        if load is None:  # a layout TMA does not write: the threads copy
            return lower_global_to_shared(s, self.ctx, self.analyzer,
                                          copy_oob_value(self.kernel, s))
        self.barriers.append(bar)
        self.ctx.layouts[bar] = row_major(bar.shape)
        self.ctx.pinned_shared.add(bar)  # initialised at kernel start: live throughout
        if not self.loops:
            return load
        self.phases.append(phase)
        return ir.Seq((load, ir.Store(phase, (ir.const(0),), ir.binary("bitxor", current, 1))))

    def visit_For(self, s: ir.For):
        store = s.annotation(STORE_COPY)
        if store is not None and _innermost(s) is store[1]:  # still the copy's nest
            stmt = self._tma_store(store[0])
            if stmt is not None:
                return stmt
        self.loops += 1
        try:
            return super().visit_For(s)
        finally:
            self.loops -= 1

    def visit_While(self, s: ir.While):
        self.loops += 1
        try:
            return self.generic(s)
        finally:
            self.loops -= 1

    def _tma_store(self, s: ir.Copy):
        """A shared -> global copy as a TMA store: when the user prefers it, and by default
        on sm_90a where TMA can store the tile (as the reference does), unless disabled."""
        opts = dict(s.options)
        prefer = opts.get(ir.PREFER_INSTRUCTION)
        ctx = self.ctx
        if prefer == "tma":
            if not self._block_level():
                raise located(NotImplementedError)(
                    f"{PREFER_TMA} inside a role or thread-range branch is not supported "
                    "here; use T.tma_copy", s.loc)
            return tma_store(s, ctx, self.analyzer, required=True)
        G = s.dst.buffer
        if prefer is not None or opts.get("disable_tma") or not ctx.target.is_hopper or \
                ctx.flag(PassConfigKey.TL_DISABLE_TMA_LOWER) or \
                ctx.flag(PassConfigKey.TL_DISABLE_TMA_STORE) or not self._whole_group() or \
                (G.strides is None and not rows_16_byte_aligned(G)):
            return None
        return tma_store(s, ctx, self.analyzer, required=False)


def lower_copies(kernel: ir.Kernel, ctx) -> ir.Kernel:
    lower = _Lower(ctx, Analyzer(), kernel)
    new = lower.visit(kernel)
    if not lower.barriers:
        return new
    body = new.body
    for phase in lower.phases:
        body = ir.Allocate(phase, body, ir.const(0, INT))
    attrs = new.attrs + tuple(("barrier_init", (bar, (1,))) for bar in lower.barriers)
    return ir.with_fields(new, body=body, allocs=new.allocs + tuple(lower.barriers),
                          attrs=attrs)
