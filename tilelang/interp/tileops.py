"""Tile operators on the CPU: Copy, Fill, Gemm, GemmSp, Reduce, CumSum, AtomicTile.

Each is collective: it runs once per block, as whole-array numpy operations, and must not be
reached under a thread-dependent condition (an error says so). Regions are evaluated to
integer starts/extents (they must be the same for every thread).

Global regions are guarded per element (SEMANTICS §3.7): reads outside the tensor give the
safe value (0 unless `T.annotate_safe_value`), writes outside are dropped. Because a region is
a rectangle, its in-bounds part is a rectangle too, so both are plain slicing. A shared,
fragment or local region reaching outside its buffer is a kernel bug and raises an error
naming the buffer and the region.
"""

from __future__ import annotations

import numpy as np

from ..ir import nodes as ir
from ..ir.dtype import DType
from ..transform.analysis.scopes import THREAD_PRIVATE
from ..transform.analysis.tile_loops import copy_as_loop
from .lanes import VARYING, at_statement, collapse, fail
from .memory import LocalStore, scope_name
from .numerics import NARROW_FLOATS, const_value, convert, round_to, tf32
from .roles import collective_ok
from .sparse import decompress

__all__ = ["compile_tile_op", "uniform_int", "uniform_value"]

F32, F64, I64 = DType("float32"), DType("float64"), DType("int64")


def uniform_value(ctx, v, what):
    if type(v) is np.ndarray and v.ndim:
        u = collapse(v)
        if u is VARYING:
            raise fail(ctx, NotImplementedError,
                       f"{what} differs between threads; it must be the same for the whole "
                       "block")
        return u
    return v


def uniform_int(ctx, v, what) -> int:
    return int(uniform_value(ctx, v, what))


def _collective(ctx, mask, what):
    if not collective_ok(ctx, mask):
        raise fail(ctx, NotImplementedError,
                   f"{what} is a collective tile operation reached under a thread-dependent "
                   "condition (only some threads take part); the CPU interpreter cannot run "
                   "it")


def tile_array(ctx, buf, what):
    try:
        st = ctx.bufs[buf]
    except KeyError:
        raise fail(ctx, NameError, f"buffer {buf.name} is not allocated here") from None
    if isinstance(st, LocalStore):
        return st.tile(ctx, what)
    return st


class Region:
    """Compiled region: closures for starts and extents (ints stay ints)."""

    __slots__ = ("buf", "starts", "exts", "is_global", "zero")

    def __init__(self, c, region: ir.BufferRegion):
        self.buf = region.buffer
        self.starts = [_int_or_fn(c, s) for s in region.starts]
        self.exts = [_int_or_fn(c, e) for e in region.extents]
        self.is_global = self.buf.scope == "global"
        self.zero = const_value(0, self.buf.dtype)

    def eval(self, ctx, what):
        starts = [s if type(s) is int else uniform_int(ctx, s(ctx), f"{what} region start")
                  for s in self.starts]
        exts = [e if type(e) is int else uniform_int(ctx, e(ctx), f"{what} region extent")
                for e in self.exts]
        return starts, exts

    def _bounds(self, ctx, shape, starts, exts, what):
        """(slice into the buffer, slice into the tile) of the in-bounds part: (x, None) when
        the whole region is inside, (None, None) when nothing is."""
        inside = True
        for s, e, n in zip(starts, exts, shape):
            if s < 0 or s + e > n:
                inside = False
                break
        if inside:
            return tuple(slice(s, s + e) for s, e in zip(starts, exts)), None
        if not self.is_global:
            text = ", ".join(f"{s}:{s + e}" for s, e in zip(starts, exts))
            raise fail(ctx, IndexError,
                       f"{what}: region {self.buf.name}[{text}] is out of range of the "
                       f"{scope_name(self.buf)} buffer {self.buf.name} with shape "
                       f"{list(shape)}")
        src, dst = [], []
        for s, e, n in zip(starts, exts, shape):
            lo, hi = max(s, 0), min(s + e, n)
            if hi <= lo:
                return None, None
            src.append(slice(lo, hi))
            dst.append(slice(lo - s, hi - s))
        return tuple(src), tuple(dst)

    def read(self, ctx, what, oob_value=None):
        """The region's values (a view when fully in bounds); outside the tensor `oob_value`
        (a T.sblock's safe value), else the kernel's safe value, else 0."""
        arr = tile_array(ctx, self.buf, what)
        starts, exts = self.eval(ctx, what)
        src, dst = self._bounds(ctx, arr.shape, starts, exts, what)
        if dst is None and src is not None:
            return arr[src]
        safe = oob_value if oob_value is not None else ctx.safe.get(self.buf, self.zero)
        out = np.full(exts, safe, dtype=arr.dtype)
        if src is not None:
            out[dst] = arr[src]
        return out

    def write(self, ctx, value, what):
        """Store `value` (any array with the region's number of elements)."""
        st = ctx.bufs.get(self.buf)
        lead = ()
        if isinstance(st, LocalStore) and st.per_lane:
            # every thread writes the same values into its own copy
            arr, shape, lead = st.data, st.shape, (slice(None),) * len(st.space.shape)
        else:
            arr = tile_array(ctx, self.buf, what)
            shape = arr.shape
        starts, exts = self.eval(ctx, what)
        if int(np.prod(exts)) != np.size(value):
            raise fail(ctx, ValueError, f"{what}: {np.size(value)} values for a region of "
                                        f"{self.buf.name} with extents {exts}")
        value = np.reshape(value, exts)
        src, dst = self._bounds(ctx, shape, starts, exts, what)
        if src is None:
            return
        arr[lead + src] = value if dst is None else value[dst]

    def update(self, ctx, fn, what):
        """`region = fn(region, in-bounds tile slice)` (read-modify-write in place)."""
        arr = tile_array(ctx, self.buf, what)
        starts, exts = self.eval(ctx, what)
        src, dst = self._bounds(ctx, arr.shape, starts, exts, what)
        if src is None:
            return
        arr[src] = fn(arr[src], dst)


def _int_or_fn(c, v):
    if isinstance(v, int):
        return v
    if isinstance(v, ir.Const):
        return int(v.value)
    return c.expr(v)


def compile_tile_op(c, s):
    return {
        ir.Copy: _copy, ir.Fill: _fill, ir.Gemm: _gemm, ir.GemmSp: _gemm_sp,
        ir.Reduce: _reduce, ir.CumSum: _cumsum, ir.AtomicTile: _atomic_tile, ir.TmaCopy: _tma_copy,
    }[type(s)](c, s)


def _copy(c, s):
    if s.src.buffer.scope in THREAD_PRIVATE or s.dst.buffer.scope in THREAD_PRIVATE:
        # each thread copies between its own buffer and a region it may place anywhere
        # (the same per-thread loop the CUDA lowering makes)
        return c.stmt(copy_as_loop(s))
    src, dst = Region(c, s.src), Region(c, s.dst)
    sdt, ddt = src.buf.dtype, dst.buf.dtype
    oob = dict(s.options).get(ir.OOB_VALUE)  # a T.sblock's safe value for this copy
    oob = c.as_type(oob, sdt) if oob is not None else None

    def run(ctx, mask):
        _collective(ctx, mask, "T.copy")
        tile = src.read(ctx, "T.copy", oob(ctx) if oob is not None else None)
        if tile.size == 0:
            return
        dst.write(ctx, convert(tile, sdt, ddt), "T.copy")
    return at_statement(s, run)


def _tma_copy(c, s):
    """T.tma_copy at once: each issuing thread (the first of each group of `scope` threads of
    the enclosing role, or of the block) adds the tile's bytes to the barrier's transaction
    count, the tile is copied (0 outside the tensor, nothing written outside it), and the
    bytes complete. Regions may differ between issuing threads (one tile per warp)."""
    src, dst = Region(c, s.src), Region(c, s.dst)
    load = s.src.buffer.scope == "global"
    if load:
        bar = s.barrier.buffer
        fbar = c.expr(s.barrier.indices[0])
    nbytes = s.src.buffer.dtype.bytes
    for e in s.src.extents:
        nbytes *= ir.int_value(e) or 0

    def run(ctx, mask):
        if ctx.space is not ctx.thread_space:
            raise fail(ctx, NotImplementedError, "T.tma_copy inside T.Parallel")
        lo, hi = (ctx.role.lo, ctx.role.hi) if ctx.role is not None else (0, ctx.nthreads)
        scope = s.scope if s.scope is not None else hi - lo
        tid = np.arange(ctx.nthreads)
        leaders = (tid - lo) % scope == 0
        if mask is not None:
            leaders &= np.broadcast_to(mask, leaders.shape)
        env = ctx.env
        try:
            for lane in np.flatnonzero(leaders):
                ctx.env = {k: (v.reshape(-1)[lane] if type(v) is np.ndarray and v.size ==
                               ctx.nthreads else v) for k, v in env.items()}
                if load:
                    i = int(np.asarray(fbar(ctx)).reshape(-1)[0])
                    ctx.barriers.expect_tx(ctx, bar, i, nbytes)
                if mask_bits is not None:
                    _multicast(ctx, src, dst, bar, i, nbytes, mask_bits)
                    continue
                tile = src.read(ctx, "T.tma_copy")
                dst.write(ctx, tile, "T.tma_copy")
                if load:
                    ctx.barriers.complete_tx(ctx, bar, i, nbytes)
        finally:
            ctx.env = env
    mask_bits = s.cluster_mask
    return at_statement(s, run)


def _multicast(ctx, src, dst, bar, i, nbytes, mask_bits):
    """One issuing thread's part of a multicast T.tma_copy: the mask's lowest-ranked block
    reads the tile and sends it to every block of the mask (its own copy lands at once, the
    peers' when they reach their own copy or wait: ClusterBarrier.land); blocks outside the
    mask load their own; then a tile in flight to this block may land."""
    cluster = ctx.cluster_barrier
    rank = cluster_rank(ctx)
    if cluster is None:
        raise fail(ctx, RuntimeError, "T.tma_copy(..., cluster_mask=...) outside a "
                                      "T.ClusterKernel")
    first = (mask_bits & -mask_bits).bit_length() - 1
    if rank == first:
        tile = np.array(src.read(ctx, "T.tma_copy"))
        starts, _ = dst.eval(ctx, "T.tma_copy")
        for r in range(mask_bits.bit_length()):
            if mask_bits >> r & 1:
                cluster.post(r, bar, i, (dst.buf, starts, tile.reshape(
                    [e for e in dst.eval(ctx, "T.tma_copy")[1]]), nbytes))
    elif not mask_bits >> rank & 1:
        dst.write(ctx, src.read(ctx, "T.tma_copy"), "T.tma_copy")
        ctx.barriers.complete_tx(ctx, bar, i, nbytes)
    cluster.land(ctx, rank, bar, i)


def _fill(c, s):
    dst = Region(c, s.dst)
    fv = c.as_type(s.value, dst.buf.dtype)

    def run(ctx, mask):
        _collective(ctx, mask, "T.fill")
        v = uniform_value(ctx, fv(ctx), "T.fill value")
        _, exts = dst.eval(ctx, "T.fill")
        dst.write(ctx, np.full(exts, v, dtype=dst.buf.dtype.numpy), "T.fill")
    return at_statement(s, run)


# ---- gemm --------------------------------------------------------------------------------------

def _operand(tile, trans):
    m = tile.reshape(tile.shape[-2:]) if tile.ndim != 2 else tile
    return m.T if trans else m


def _gemm_kind(adt, bdt):
    if adt.name == "float64" or bdt.name == "float64":
        return F64
    if adt.is_int and bdt.is_int:
        return I64
    return F32


def _gemm(c, s, what="T.gemm", read_a=None):
    """C (+)= op(A) @ op(B); `read_a(ctx)` gives op(A) where it is not A's region itself."""
    A, B, C = Region(c, s.A), Region(c, s.B), Region(c, s.C)
    adt, bdt, cdt = A.buf.dtype, B.buf.dtype, C.buf.dtype
    kind = _gemm_kind(adt, bdt)
    tf32_a = adt.name == "float32" and kind is F32
    tf32_b = bdt.name == "float32" and kind is F32
    clear = s.clear_accum
    fclear = c.expr(clear) if isinstance(clear, ir.Expr) else None
    if read_a is None:
        def read_a(ctx):
            return _operand(A.read(ctx, what), s.trans_A)

    def run(ctx, mask):
        _collective(ctx, mask, what)
        a = read_a(ctx).astype(kind.numpy)
        b = _operand(B.read(ctx, what), s.trans_B).astype(kind.numpy)
        if tf32_a:
            a = tf32(a)
        if tf32_b:
            b = tf32(b)
        prod = a @ b
        do_clear = bool(uniform_value(ctx, fclear(ctx), "clear_accum")) if fclear else clear
        if not do_clear:
            old = C.read(ctx, what)
            prod = convert(old, cdt, kind).reshape(prod.shape) + prod
        C.write(ctx, convert(prod, kind, cdt), what)
    return at_statement(s, run)


def _gemm_sp(c, s):
    """T.gemm_sp: the dense product with A decompressed from its kept values and metadata
    (interp/sparse.py)."""
    from ..cuda.intrinsics.sparse_layout import GROUP_CONFIG

    A, E = Region(c, s.A), Region(c, s.E)
    _, group = GROUP_CONFIG[A.buf.dtype]

    def read_a(ctx):
        values = _operand(A.read(ctx, "T.gemm_sp"), s.trans_A)
        meta = _operand(E.read(ctx, "T.gemm_sp"), s.trans_E)
        dense, bad = decompress(values, np.ascontiguousarray(meta), group)
        if bad is not None:
            row, g, code = bad
            raise fail(ctx, ValueError,
                       f"T.gemm_sp: the metadata {E.buf.name} holds {code:#06b} for group {g} "
                       f"(elements {group * g}..{group * g + group - 1}) of row {row}, which "
                       "is not a valid index pair: " + (
                           "two increasing 2-bit positions" if group == 4 else
                           "0b0100 or 0b1110 for a float32 pair"))
        return dense
    return _gemm(c, s, "T.gemm_sp", read_a)


# ---- reductions and scans ------------------------------------------------------------------------

def _initial(kind, dt):
    if kind == "max":
        return -np.inf if dt.is_float else dt.min_value()
    if kind == "min":
        return np.inf if dt.is_float else dt.max_value()
    return 0


def _reduce_values(kind, x, dim, dt, nan_propagate):
    if kind == "sum":
        return np.sum(x, axis=dim, dtype=x.dtype)
    if kind == "abssum":
        return np.sum(np.abs(x), axis=dim, dtype=x.dtype)
    if kind in ("max", "min"):
        if nan_propagate:
            uf = np.maximum if kind == "max" else np.minimum
        else:
            uf = np.fmax if kind == "max" else np.fmin
        return uf.reduce(x, axis=dim, initial=x.dtype.type(_initial(kind, dt)))
    if kind == "absmax":
        uf = np.maximum if nan_propagate else np.fmax
        return uf.reduce(np.abs(x), axis=dim, initial=x.dtype.type(0))
    uf = {"bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor}[kind]
    return uf.reduce(x, axis=dim)


def _combine(kind, old, new, nan_propagate):
    if kind in ("sum", "abssum"):
        return old + new
    if kind in ("max", "absmax"):
        return (np.maximum if nan_propagate else np.fmax)(old, new)
    if kind == "min":
        return (np.minimum if nan_propagate else np.fmin)(old, new)
    return {"bitand": np.bitwise_and, "bitor": np.bitwise_or,
            "bitxor": np.bitwise_xor}[kind](old, new)


def _reduce(c, s):
    src, dst, dim, kind = s.src, s.dst, s.dim, s.kind
    sdt, ddt = src.dtype, dst.dtype
    clear = s.clear or kind == "abssum"
    narrow = ddt.name in NARROW_FLOATS
    what = f"T.reduce_{kind}"

    def run(ctx, mask):
        st = ctx.bufs.get(src)
        if isinstance(st, LocalStore) and st.per_lane:
            _reduce_per_thread(ctx, mask, s, st, clear, narrow, what)
            return
        _collective(ctx, mask, what)
        x = convert(tile_array(ctx, src, what), sdt, ddt)
        d = dim % x.ndim
        r = _reduce_values(kind, x, d, ddt, s.nan_propagate)
        darr = tile_array(ctx, dst, what)
        if r.size != darr.size:
            raise fail(ctx, ValueError, f"{what}: dst {dst.name} has {darr.size} elements, "
                                        f"the reduction gives {r.size}")
        if not clear:
            r = _combine(kind, darr.reshape(r.shape), r, s.nan_propagate)
        if narrow:
            r = round_to(r, ddt)
        darr[...] = np.reshape(r, darr.shape)
    return at_statement(s, run)


def _reduce_per_thread(ctx, mask, s, st, clear, narrow, what):
    """A reduction of a thread-private buffer into thread-private storage: each thread
    reduces its own copy (lanes of the LocalStore), under the statement's mask."""
    dst_st = ctx.bufs.get(s.dst)
    if not isinstance(dst_st, LocalStore):
        raise fail(ctx, NotImplementedError,
                   f"{what} of local buffer {s.src.name}, whose contents differ between "
                   f"threads, into the {scope_name(s.dst)} buffer {s.dst.name}: reduce into a "
                   "local buffer or variable")
    lead = len(st.space.shape)
    x = convert(st.data, s.src.dtype, s.dst.dtype)
    r = _reduce_values(s.kind, x, lead + s.dim % len(st.shape), s.dst.dtype, s.nan_propagate)
    if not dst_st.per_lane:
        dst_st._widen()
    out_shape = dst_st.data.shape
    r = np.reshape(r, out_shape)
    if not clear:
        r = _combine(s.kind, dst_st.data, r, s.nan_propagate)
    if narrow:
        r = round_to(r, s.dst.dtype)
    if mask is None:
        dst_st.data[...] = r
    else:
        keep = np.reshape(np.broadcast_to(mask, st.space.shape),
                          st.space.shape + (1,) * (len(out_shape) - lead))
        np.copyto(dst_st.data, r, where=np.broadcast_to(keep, out_shape), casting="unsafe")


def _cumsum(c, s):
    src, dst, dim = s.src, s.dst, s.dim
    sdt, ddt = src.dtype, dst.dtype
    acc = F32 if (sdt.is_float and sdt.bits < 32) else sdt
    what = "T.cumsum" if s.kind == "sum" else "T.cummax"

    def run(ctx, mask):
        _collective(ctx, mask, what)
        x = convert(tile_array(ctx, src, what), sdt, acc)
        if s.reverse:
            x = np.flip(x, axis=dim)
        if s.kind == "sum":
            r = np.cumsum(x, axis=dim, dtype=x.dtype)
        else:
            r = (np.fmax if acc.is_float else np.maximum).accumulate(x, axis=dim)
        if s.reverse:
            r = np.flip(r, axis=dim)
        darr = tile_array(ctx, dst, what)
        darr[...] = convert(r, acc, ddt)
    return at_statement(s, run)


# ---- tile atomics ----------------------------------------------------------------------------

_TILE_ATOMIC = {"add": np.add, "max": np.fmax, "min": np.fmin}


def rank_in_cluster(block, dims) -> int:
    """The rank of `block` in its cluster of `dims` blocks (x fastest, as %cluster_ctarank)."""
    (bx, by, bz), (cx, cy, cz) = block, dims
    return ((bz % cz) * cy + by % cy) * cx + bx % cx


def cluster_rank(ctx) -> int:
    """The running block's rank in its cluster."""
    return rank_in_cluster(ctx.block, ctx.cluster)


def _atomic_tile(c, s):
    dst = Region(c, s.dst)
    ddt = dst.buf.dtype
    op = _TILE_ATOMIC[s.op]
    what = "T.store_cluster_sum" if s.cluster_sum else f"T.atomic_{s.op}"
    if isinstance(s.src, ir.BufferRegion):
        src = Region(c, s.src)
        sdt = src.buf.dtype
        fscalar = None
    else:
        src = None
        fscalar = c.as_type(s.src, ddt)

    def run(ctx, mask):
        _collective(ctx, mask, what)
        _, exts = dst.eval(ctx, what)
        if src is not None:
            vals = convert(src.read(ctx, what), sdt, ddt)
            if vals.size != int(np.prod(exts)):
                raise fail(ctx, ValueError, f"{what}: source has {vals.size} elements, the "
                                            f"destination region {int(np.prod(exts))}")
            vals = vals.reshape(exts)
        else:
            vals = np.full(exts, uniform_value(ctx, fscalar(ctx), f"{what} value"),
                           dtype=ddt.numpy)

        # the blocks run in order, so a cluster's first block (its smallest coordinates)
        # stores before the others add
        first = s.cluster_sum and cluster_rank(ctx) == 0

        def rmw(old, sub):
            v = vals if sub is None else vals[sub]
            new = v.astype(old.dtype) if first else op(old, v)
            return round_to(new, ddt) if ddt.name in NARROW_FLOATS else new
        dst.update(ctx, rmw, what)
    return at_statement(s, run)
