"""A plain `T.copy` performed by TMA (called from `lower_copies`, sm_90a).

Expects: a `Copy` between a global region and a shared tile whose layout is in `ctx.layouts`
(a global -> shared copy marked `prefer_instruction="tma"` and not issued ahead by the
pipeliner; a shared -> global copy lowered to its loop nest, see `store_copy`), code every
thread of the block runs, or (a default store) every thread of a role's thread group, whose
barriers insert_sync makes the role's named barrier and whose `ctx.tid` counts from the
role's first thread (`lower_copies` checks).

Guarantees: the copy keeps T.copy's synchronous meaning.

  * A load becomes: thread 0 announces the tile's bytes on an mbarrier of its own
    (`tl::mbarrier_arrive_expect_tx`, one arrival expected) and starts the transfer; every
    thread waits for the barrier's current phase (the parity flips at every execution: a
    register counts them when the copy is inside a loop). The transfer writes through the
    async proxy (marked ("async", True): insert_sync orders it after earlier accesses of the
    tile); the wait makes the bytes visible to every waiting thread.
  * A store becomes: `fence.proxy.async` in every thread (its writes of the tile reach the
    async proxy), a barrier, then thread 0 starts the transfer, commits it and waits until the
    tile has been read (`tl::tma_store_wait<0>`, which defer_store_waits may move later; the
    next barrier orders other threads' reuse of the tile after it). Global writes are visible
    to the host when the kernel ends, as for every TMA store.

The transfer is one 1-D bulk copy (`tl::tma_load_1d` / `tl::tma_store_1d`, no tensor map)
when both regions are contiguous runs of memory (the shared tile row-major), the global one is
provably inside its tensor, both start 16-byte aligned and the bytes are a multiple of 16;
otherwise tensor-map boxes as `T.tma_copy` cuts them (lower_tma_copy.py), which read 0 and
write nothing outside the tensor, so ragged edges are exact, issued by a loop over the boxes
(one per dimension cut into several; a swizzled tile's boxes are one swizzle row wide, its
column blocks one iteration each), as the reference issues them. A tensor at an address
computed in the kernel (`T.make_tensor` of a pointer) has no tensor map: only the 1-D copy
applies.
A copy TMA cannot do is a located error when the user asked for TMA, except a shared tile
laid out in a way TMA does not write (neither swizzled nor row-major: a hand-written `Layout`
that is not one of the swizzles, see layout/swizzle.py recognised_swizzle), which the threads
copy as before; a default store TMA cannot do stays the threads'.
"""

from __future__ import annotations

import math

from ...errors import located
from ...ir import nodes as ir
from .lower_tma_copy import tma_descriptor, TmaBoxPlan, TMA_DTYPES
from ..analysis.tma_plan import contiguous_offset

MAX_BULK_BYTES = (1 << 20) - 1  # an mbarrier's transaction count
PREFER_TMA = 'T.copy(prefer_instruction="tma")'


def _fail(s, required, msg):
    if required:
        raise located(ValueError)(f"{PREFER_TMA}: {msg}", s.loc)
    return None


def _inside(region: ir.BufferRegion, analyzer) -> bool:
    for (start, extent), n in zip(region.region, region.buffer.shape):
        if not (analyzer.prove(ir.compare("ge", start, 0)) and analyzer.prove(
                ir.compare("le", ir.binary("add", start, extent), n))):
            return False
    return True


def _bulk_1d(g_region, s_region, layout, analyzer):
    """(global start index, shared start index, bytes) of a copy one 1-D bulk transfer can
    do, else None."""
    G, S = g_region.buffer, s_region.buffer
    if layout is not None and not layout.is_row_major():
        return None
    esize = G.dtype.bytes
    n_elems = [ir.int_value(e) for e in g_region.extents]
    if None in n_elems or math.prod(n_elems) != math.prod(
            ir.int_value(e) or 0 for e in s_region.extents):
        return None
    nbytes = math.prod(n_elems) * esize
    if nbytes % 16 or nbytes > MAX_BULK_BYTES or not _inside(g_region, analyzer):
        return None
    g_off = contiguous_offset(g_region, analyzer)
    s_off = contiguous_offset(s_region, analyzer)
    if g_off is None or s_off is None:
        return None
    unit = 16 // math.gcd(16, esize)
    if not (analyzer.is_divisible(g_off, unit) and analyzer.is_divisible(s_off, unit)):
        return None
    return g_region.starts, s_region.starts, nbytes


def _common_checks(s, G, S, required):
    if G.dtype is not S.dtype:
        return _fail(s, required, f"TMA does not convert {G.dtype} to {S.dtype}")
    if G.dtype.name not in TMA_DTYPES:
        return _fail(s, required, f"TMA does not move {G.dtype} elements")
    if dict(s.options).get(ir.OOB_VALUE) is not None:
        return _fail(s, required, f"{G.name} reads its T.annotate_safe_value value outside "
                                  "the tensor (TMA reads 0)")
    strides = G.strides
    if strides is not None:
        if ir.int_value(strides[-1]) != 1:
            return _fail(s, required, f"{G.name}'s innermost stride is not 1")
        for st in strides[:-1]:
            v = ir.int_value(st)
            if v is not None and (v * G.dtype.bytes) % 16:
                return _fail(s, required, f"{G.name}'s stride {v} is not a multiple of 16 "
                                          "bytes")
    return True


def _plan(s, g_region, s_region, ctx, analyzer, required):
    """("1d", (g index, s index, bytes)) or ("boxes", TmaBoxPlan) or None."""
    G, S = g_region.buffer, s_region.buffer
    if not ctx.target.is_hopper:
        return _fail(s, required, f"TMA needs sm_90a; the target is {ctx.target.arch}")
    if not _common_checks(s, G, S, required):
        return None
    one = _bulk_1d(g_region, s_region, ctx.layouts.get(S), analyzer)
    if one is not None:
        return "1d", one
    lay = ctx.layouts.get(S)
    if lay is not None and not getattr(lay, "swizzle_bytes", None) and not lay.is_row_major():
        return None  # a layout TMA does not write (a hand-written one): the threads copy
    if G.computed_address:
        return _fail(s, required, f"{G.name} is at an address computed in the kernel (no "
                                  "tensor map), and the copy is not one contiguous, aligned "
                                  "run inside it (a 1-D bulk copy)")
    try:
        return "boxes", TmaBoxPlan(s, ctx, analyzer)
    except ValueError:
        if required:
            raise
        return None


def tma_load(s: ir.Copy, ctx, analyzer, barrier: ir.Buffer, parity) -> ir.Stmt:
    """The synchronous TMA load of `s` (prefer_instruction="tma"), waiting on `barrier` (one
    mbarrier expecting one arrival) at `parity`; None when the tile's layout is one TMA does
    not write (neither swizzled nor row-major): the threads copy it."""
    planned = _plan(s, s.src, s.dst, ctx, analyzer, required=True)
    if planned is None:
        return None
    kind, plan = planned
    bar = ir.address_of(barrier, (0,))
    async_ = (("async", True),)
    if kind == "1d":
        g_idx, s_idx, nbytes = plan
        loads = [ir.Evaluate(ir.Call("call_extern", (
            "tl::tma_load_1d", ir.address_of(s.dst.buffer, s_idx),
            ir.address_of(s.src.buffer, g_idx), ir.const(nbytes), bar), ir.DType("void"),
            async_))]
    else:
        nbytes = plan.bytes
        desc = tma_descriptor(ctx, plan.G, plan.box, plan.swizzle)
        param = ir.Call("address_of_param", (desc.param,), ir.DType("handle"))
        loads = [plan.box_loop(lambda coords, index: ir.Evaluate(ir.Call("call_extern", (
            "tl::tma_load", param, bar, ir.address_of(plan.S, index), *reversed(coords)),
            ir.DType("void"), async_)))]
    issue = ir.If(ir.compare("eq", ctx.tid, 0), ir.Seq((
        ir.extern_stmt("tl::mbarrier_arrive_expect_tx", bar, ir.const(nbytes)),
        *loads)), None, loc=s.loc)
    wait = ir.Evaluate(ir.Call("call_extern", ("tl::mbarrier_wait", bar, parity),
                               ir.DType("void")), loc=s.loc)
    return ir.Seq((issue, wait))


def tma_store(s: ir.Copy, ctx, analyzer, required: bool):
    """The TMA store of shared -> global copy `s`, or None (not `required`) where TMA cannot
    do it."""
    planned = _plan(s, s.dst, s.src, ctx, analyzer, required)
    if planned is None:
        return None
    kind, plan = planned
    if kind == "1d":
        g_idx, s_idx, nbytes = plan
        issue = [ir.extern_stmt("tl::tma_store_1d", ir.address_of(s.dst.buffer, g_idx),
                                ir.address_of(s.src.buffer, s_idx), ir.const(nbytes))]
    else:
        desc = tma_descriptor(ctx, plan.G, plan.box, plan.swizzle)
        param = ir.Call("address_of_param", (desc.param,), ir.DType("handle"))
        issue = [plan.box_loop(lambda coords, index: ir.extern_stmt(
            "tl::tma_store", param, ir.address_of(plan.S, index), *reversed(coords)))]
    issue += [ir.extern_stmt("tl::tma_store_arrive"), ir.extern_stmt("tl::tma_store_wait<0>")]
    return ir.Seq((ir.extern_stmt("tl::fence_proxy_async"), ir.extern_stmt("__syncthreads"),
                   ir.If(ir.compare("eq", ctx.tid, 0), ir.Seq(tuple(issue)), None,
                         loc=s.loc)))
