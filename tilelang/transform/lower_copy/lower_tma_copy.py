"""Lower `T.tma_copy` to TMA instructions (called from `lower_copies`).

Expects: `TmaCopy` nodes whose `leader` transform/warp_roles.py set, the shared tile's layout
in `ctx.layouts`, an sm_90a target.

Guarantees: a load becomes

    if leader: tl::mbarrier_expect_tx(barrier, bytes of the tile); one TMA load per box

(no arrival, no wait: the user arrives on and waits for the barrier; outside user roles the
loads are marked ("async", True): insert_sync orders them after earlier reads of the tile);
with a cluster mask, the loads are multicast (`tl::tma_load_multicast`) by the lowest-ranked
block of the mask, skipped by its other blocks and unicast by the blocks outside it (every
block expects the bytes on its own barrier); a store

    fence.proxy.async (every thread: its generic writes of the tile reach the TMA unit)
    if leader: one TMA store per box; tl::tma_store_arrive()   (no wait)

The tile is cut into boxes TMA can move: at most 256 elements per dimension, an innermost
box of whole 16-byte units (a swizzled tile: exactly one swizzle row, `column_block`
elements), each landing as TMA writes it, densely in box order (row-major tiles) or as one
panel of the swizzled layout (rows starting at a multiple of 8). One tensor map per global
tensor and box shape, encoded by the host per call, so symbolic shapes and strides are fine
(the host checks that the strides are multiples of 16 bytes). Elements of a box outside the
tensor read as 0 (and still count towards the barrier's bytes) and are not written. A copy
TMA cannot perform is a located error naming the constraint.
"""

from __future__ import annotations

import math

from ...codegen.launch import TmaDescriptor
from ...errors import located
from ...ir import nodes as ir
from ..analysis.tma_plan import rows_16_byte_aligned

MAX_BOX = 256
MAX_LOADS = 64  # boxes per T.tma_copy; more is a located error (use fewer, larger tiles)
TMA_DTYPES = ("uint8", "int8", "float8_e4m3", "float8_e5m2", "uint16", "int16", "float16",
               "bfloat16", "uint32", "int32", "float32", "uint64", "int64", "float64")


def _err(s, msg, exc=ValueError):
    # also planning the boxes of a plain T.copy that prefers TMA (copy_tma.py)
    what = "T.tma_copy" if isinstance(s, ir.TmaCopy) else 'T.copy(prefer_instruction="tma")'
    raise located(exc)(f"{what}: {msg}", s.loc)


def _largest_divisor(n: int, limit: int, ok=lambda d: True) -> int:
    for d in range(min(n, limit), 0, -1):
        if n % d == 0 and ok(d):
            return d
    return 0


def _row_major_strides(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return list(reversed(strides))


class TmaBoxPlan:
    """Boxes of one T.tma_copy: `box` over the global tensor's dims (outermost first) and one
    (global coordinates, shared index) pair per box."""

    def __init__(self, s: ir.TmaCopy, ctx, analyzer):
        self.s = s
        self.load = s.src.buffer.scope == "global"
        self.g_region, self.s_region = (s.src, s.dst) if self.load else (s.dst, s.src)
        G, S = self.g_region.buffer, self.s_region.buffer
        self.G, self.S = G, S
        if G.dtype.name not in TMA_DTYPES:
            _err(s, f"TMA does not move {G.dtype} elements")
        if len(G.shape) > 5:
            _err(s, f"TMA tensors have at most 5 dimensions; {G.name} has {len(G.shape)}")
        self.esize = G.dtype.bytes
        if G.strides is None and len(G.shape) > 1 and not rows_16_byte_aligned(G):
            # static sizes that TMA rejects fail here, at the user's line, not at the first
            # call (cuTensorMapEncodeTiled needs 16-byte row strides); dynamic ones are
            # checked when the descriptor is encoded
            if all(isinstance(x, int) for x in G.shape[1:]):
                _err(s, f"TMA needs the rows of {G.name} a multiple of 16 bytes apart; they "
                        f"are {math.prod(G.shape[1:]) * self.esize} bytes apart")
        g_ext = [ir.int_value(e) for e in self.g_region.extents]
        s_ext = [ir.int_value(e) for e in self.s_region.extents]
        if None in g_ext or None in s_ext:
            _err(s, "the tile's extents must be static (TMA boxes are fixed at compile time)")
        self.g_dims = [d for d, e in enumerate(g_ext) if e != 1]
        self.s_dims = [d for d, e in enumerate(s_ext) if e != 1]
        if not self.g_dims:
            _err(s, "a tile of one element is not a TMA transfer")
        if self.g_dims[-1] != len(G.shape) - 1:
            _err(s, f"the tile must run along {G.name}'s innermost dimension (TMA boxes are "
                    "whole 16-byte units of contiguous elements)")
        if self.s_dims[-1] != len(S.shape) - 1:
            _err(s, f"the tile must run along {S.name}'s innermost dimension")
        self.E = [g_ext[d] for d in self.g_dims]
        lay = ctx.layouts.get(S)
        self.swizzle = getattr(lay, "swizzle_bytes", None) or 0
        if self.swizzle:
            self.B = self._swizzled_boxes(lay, analyzer)
        elif lay is None or lay.is_row_major():
            self.B = self._row_major_boxes(analyzer)
        else:
            _err(s, f"{S.name}'s layout ({lay!r}) is neither swizzled nor row-major; TMA "
                    "writes only those")
        self.counts = [e // b for e, b in zip(self.E, self.B)]  # boxes along each dim
        if math.prod(self.counts) > MAX_LOADS:
            _err(s, f"the tile needs {math.prod(self.counts)} TMA boxes of {self.B} elements; "
                    f"at most {MAX_LOADS} are issued per T.tma_copy")
        self.box = [1] * len(G.shape)
        for d, b in zip(self.g_dims, self.B):
            self.box[d] = b
        self.bytes = math.prod(self.E) * self.esize

    def _swizzled_boxes(self, lay, analyzer):
        s, S = self.s, self.S
        cb = lay.column_block
        if len(S.shape) < 2 or not cb:
            _err(s, f"{S.name} is swizzled but has no column blocks")
        starts = self.s_region.starts
        if not analyzer.is_divisible(ir.as_expr(starts[-1]), cb) or self.E[-1] % cb:
            _err(s, f"columns of swizzled {S.name} must be copied in whole {cb}-element "
                    f"swizzle rows (start {starts[-1]}, extent {self.E[-1]})")
        B = [1] * len(self.E)
        B[-1] = cb
        if len(self.s_dims) >= 2 and self.s_dims[-2] == len(S.shape) - 2:
            rows = self.E[-2]
            r0 = ir.as_expr(starts[-2])
            if not analyzer.is_divisible(r0, 8):
                _err(s, f"rows of swizzled {S.name} must start at a multiple of 8 (a swizzle "
                        f"atom), got {starts[-2]}")
            B[-2] = _largest_divisor(rows, MAX_BOX, lambda d: d % 8 == 0 or d == rows)
            if not B[-2]:
                _err(s, f"{rows} rows cannot be cut into boxes of whole swizzle atoms")
        return B

    def _row_major_boxes(self, analyzer):
        s, S, esize = self.s, self.S, self.esize
        unit = 16 // math.gcd(16, esize)  # elements per 16 bytes
        inner = _largest_divisor(self.E[-1], MAX_BOX, lambda d: d % unit == 0)
        if not inner:
            _err(s, f"rows of {self.E[-1]} {S.dtype} elements are not a multiple of 16 bytes")
        if any(not isinstance(n, int) for n in S.shape):
            _err(s, f"{S.name} must have a static shape")
        strides = _row_major_strides(S.shape)
        B = [1] * len(self.E)
        B[-1] = inner
        dense = inner  # elements one box spans so far, innermost dims first
        for t in range(len(self.E) - 2, -1, -1):
            # a box spanning dim t lands densely only if the tile's rows along t follow each
            # other in S without a gap; otherwise one box per index along t
            if strides[self.s_dims[t]] == dense:
                B[t] = _largest_divisor(self.E[t], MAX_BOX)
                dense *= B[t]
        offset = sum((ir.binary("mul", st, k) for st, k in zip(self.s_region.starts, strides)),
                     ir.const(0))
        if not analyzer.is_divisible(analyzer.simplify(offset), unit):
            _err(s, f"the tile does not start 16-byte aligned in {S.name} (element offset "
                    f"{analyzer.simplify(offset)})")
        return B

    def boxes(self):
        """(global coordinates, shared index) of every box."""
        counts = self.counts
        g_starts = [ir.as_expr(x) for x in self.g_region.starts]
        s_starts = [ir.as_expr(x) for x in self.s_region.starts]
        for flat in range(math.prod(counts)):
            coords, index = list(g_starts), list(s_starts)
            rest = flat
            for t in range(len(counts) - 1, -1, -1):
                o = (rest % counts[t]) * self.B[t]
                rest //= counts[t]
                if o:
                    gd, sd = self.g_dims[t], self.s_dims[t]
                    coords[gd] = ir.binary("add", coords[gd], o)
                    index[sd] = ir.binary("add", index[sd], o)
            yield coords, index

    def box_loop(self, issue):
        """The boxes as a loop nest: `issue(coords, index)` (global coordinates, shared index,
        expressions of the loop variables) gives the statement of one box, inside one serial
        loop per dimension cut into more than one box (outermost first)."""
        coords = [ir.as_expr(x) for x in self.g_region.starts]
        index = [ir.as_expr(x) for x in self.s_region.starts]
        loops = []
        for t, n in enumerate(self.counts):
            if n == 1:
                continue
            v = ir.Var("box")
            step = ir.binary("mul", v, self.B[t])
            gd, sd = self.g_dims[t], self.s_dims[t]
            coords[gd] = ir.binary("add", coords[gd], step)
            index[sd] = ir.binary("add", index[sd], step)
            loops.append((v, n))
        body = issue(coords, index)
        for v, n in reversed(loops):
            body = ir.For(v, ir.const(0), ir.const(n), "serial", body, loc=self.s.loc)
        return body


def tma_descriptor(ctx, G, box, swizzle):
    for d in ctx.tma_descriptors:
        if d.buffer is G and tuple(d.box) == tuple(box) and d.swizzle == swizzle and \
                d.im2col is None:
            return d
    name = f"{G.name}_tma_desc{len(ctx.tma_descriptors)}"
    d = TmaDescriptor(name, G, tuple(box), swizzle)
    d.param = ir.Var(name, ir.DType("handle"))
    ctx.tma_descriptors.append(d)
    return d


def lower_tma_copy(s: ir.TmaCopy, ctx, analyzer) -> ir.Stmt:
    if not ctx.target.is_hopper:
        _err(s, f"TMA needs sm_90a; the target is {ctx.target.arch}", NotImplementedError)
    if s.leader is None:
        raise AssertionError("warp_roles.py sets every T.tma_copy's leader")
    plan = TmaBoxPlan(s, ctx, analyzer)
    desc = tma_descriptor(ctx, plan.G, plan.box, plan.swizzle)
    param = ir.Call("address_of_param", (desc.param,), ir.DType("handle"))
    issue = []
    if plan.load:
        bar = ir.Call("address_of", (s.barrier,), ir.DType("handle"))
        issue.append(ir.extern_stmt("tl::mbarrier_expect_tx", bar, ir.const(plan.bytes)))
        # at block level, the load must not overwrite the tile before every thread's earlier
        # reads of it are done (insert_sync puts a barrier before it: an asynchronous write);
        # in a role the user's mbarriers order that
        attrs = () if s.in_role else (("async", True),)

        def loads(name, *mask):
            return ir.Seq(tuple(ir.Evaluate(ir.Call("call_extern", (
                name, param, bar, ir.address_of(plan.S, index), *mask, *reversed(coords)),
                ir.DType("void"), attrs)) for coords, index in plan.boxes()))
        if s.cluster_mask is None:
            issue.append(loads("tl::tma_load"))
        else:
            mask = s.cluster_mask
            rank = ir.Call("call_extern", ("tl::cluster_ctarank",), ir.DType("int32"))
            first = (mask & -mask).bit_length() - 1
            outside = ir.compare("eq", ir.binary("bitand", ir.binary(
                "shr", ir.const(mask), rank), 1), 0)
            issue.append(ir.If(ir.compare("eq", rank, first), loads(
                "tl::tma_load_multicast", ir.const(mask, "uint16")),
                ir.If(outside, loads("tl::tma_load"), None, loc=s.loc), loc=s.loc))
        return ir.If(s.leader, ir.Seq(tuple(issue)), None, loc=s.loc)
    for coords, index in plan.boxes():
        issue.append(ir.extern_stmt("tl::tma_store", param, ir.address_of(plan.S, index),
                                    *reversed(coords)))
    issue.append(ir.extern_stmt("tl::tma_store_arrive"))
    return ir.Seq((ir.extern_stmt("tl::fence_proxy_async"),
                   ir.If(s.leader, ir.Seq(tuple(issue)), None, loc=s.loc)))
