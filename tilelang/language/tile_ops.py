"""Tile operators: copy, fill/clear, gemm, reductions, scans, atomics.

Operands are canonicalised here, at trace time, so that errors point at the user's line and
later passes see one form: `Copy`/`Fill`/`Gemm`/`AtomicTile` hold `BufferRegion`s whose
extents already follow the reference's pairing rules (SEMANTICS.md §3).
"""

from __future__ import annotations

from ..frontend.builder import current_builder, current_loc, defer_error, emit, error
from ..ir import nodes as ir
from ..ir.dtype import ATOMIC_DTYPES, TMA_ADD_DTYPES, gemm_dtype_problem
from .indexing import written_negative
from .reducer import note_legacy_use

_SCOPE_RANK = {"global": 0, "shared": 1, "shared.dyn": 1, "local.fragment": 2, "local": 2,
               "local.var": 2}


def _check_tile_context(what: str, elementwise: bool = False):
    """The builder of the enclosing kernel; a tile op (not `elementwise`, i.e. not a one-element
    form such as `T.copy(A[i, j], B[i, j])`) may not be inside a T.Parallel loop."""
    b = current_builder(what=what)
    if not b.in_kernel():
        raise error(RuntimeError, f"{what} must be inside `with T.Kernel(...)`")
    for f in () if elementwise else b.frames:
        if f.kind == "for" and f.data.get("loop_kind") == "parallel":
            raise error(ValueError, "[Tilelang Semantic Check] Only elementwise operations are "
                                    f"allowed inside a parallel loop. Got a tile-op {what}")
    return b


def to_region(x, what: str):
    """Buffer -> full region; BufferRegion -> itself; Load -> None (a start point)."""
    if isinstance(x, ir.BufferRegion):
        return x
    if isinstance(x, ir.Buffer):
        if x.scope == "local.var":
            return ir.BufferRegion(x, ((0, 1),))
        return ir.BufferRegion.full(x)
    if isinstance(x, ir.Load):
        return None
    ref_buffer = getattr(x, "buffer", None)
    if getattr(x, "__tl_ref__", False) and ref_buffer is not None:
        return None
    raise error(TypeError, f"{what} expects a buffer, a region (A[0:32, k]) or a start point "
                           f"(A[i, j]), got {type(x).__name__} {x!r}")


def _start_point(x):
    if isinstance(x, ir.Load):
        return x.buffer, x.indices
    return x.buffer, x.indices  # Ref


def _tile_start(x):
    """(buffer, indices) of a start point as the start of a tile: a position, so the indices
    that count from the end as element indices are taken as written (a computed start before
    the tensor reads zeros; a constant one is an error, `_check_tile_start`)."""
    buf, idx = _start_point(x)
    idx = list(idx)
    for d, written in (written_negative(x) if isinstance(x, ir.Load) else ()):
        idx[d] = ir.as_expr(written)
    return buf, tuple(idx)


def _non_unit(extents):
    return [(d, e) for d, e in enumerate(extents) if ir.int_value(e) != 1]


def _check_tile_start(region: ir.BufferRegion, what):
    """The start of a tile is a position in the buffer, not a Python index (a start point's
    region is built from its indices as written, `_tile_start`): a constant one outside the
    buffer is an error (a computed one is guarded like any access: zeros read, stores
    skipped)."""
    buf = region.buffer
    starts = region.starts
    for d, (start, size) in enumerate(zip(starts, buf.shape)):
        value = ir.int_value(start)
        if value is not None and (value < 0 or (isinstance(size, int) and value >= size)):
            where = f"{buf.name}[{', '.join(str(s) for s in starts)}]"
            raise error(IndexError, f"{what}: the tile starts at {where}, outside {buf.name} "
                                    f"(dimension {d} has {size} elements); a tile's start is "
                                    "a position, not counted from the end")


def _region_from_start(buffer, indices, other_extents, what):
    """Extents of a start-point operand, taken from the other side (trailing dims aligned)."""
    if len(indices) < len(other_extents):
        raise error(AssertionError, f"{what}: the start point {buffer.name}{list(indices)} has "
                                    f"fewer indices ({len(indices)}) than the other operand's "
                                    f"rank ({len(other_extents)})")
    lead = len(indices) - len(other_extents)
    extents = [1] * lead + list(other_extents)
    return ir.BufferRegion(buffer, tuple(zip(indices, extents)))


def _with_extents(region: ir.BufferRegion, extents_non_unit):
    """Replace the non-unit extents of `region`, in order, by `extents_non_unit`."""
    new, k = [], 0
    for start, extent in region.region:
        if ir.int_value(extent) == 1:
            new.append((start, extent))
        else:
            new.append((start, extents_non_unit[k]))
            k += 1
    return ir.BufferRegion(region.buffer, tuple(new))


def pair_regions(src, dst, what="T.copy"):
    """Canonicalise two operands of a copy-like op to regions with paired extents."""
    src_r, dst_r = to_region(src, what), to_region(dst, what)
    if src_r is None and dst_r is None:
        return None  # both start points: a single element
    if isinstance(src, ir.Buffer) and isinstance(dst, ir.Buffer) and src.scope != "local.var" \
            and dst.scope != "local.var":
        if not _shapes_equal(src.shape, dst.shape):
            raise error(ValueError, f"{what}({src.name}, {dst.name}): whole-buffer operands must "
                                    f"have equal shapes, got {list(src.shape)} and "
                                    f"{list(dst.shape)}")
        return src_r, dst_r
    if src_r is None:
        buf, idx = _tile_start(src)
        src_r = _region_from_start(buf, idx, [e for _, e in dst_r.region], what)
    if dst_r is None:
        buf, idx = _tile_start(dst)
        dst_r = _region_from_start(buf, idx, [e for _, e in src_r.region], what)
    _check_tile_start(src_r, what)
    _check_tile_start(dst_r, what)
    s_nu, d_nu = _non_unit(src_r.extents), _non_unit(dst_r.extents)
    if len(s_nu) != len(d_nu):
        raise error(ValueError, f"{what}: the operands' non-unit extents do not pair up: "
                                f"{_fmt_ext(src_r)} vs {_fmt_ext(dst_r)}")
    src_rank = _SCOPE_RANK.get(src_r.buffer.scope, 0)
    dst_rank = _SCOPE_RANK.get(dst_r.buffer.scope, 0)
    base_is_dst = dst_rank > src_rank
    base = d_nu if base_is_dst else s_nu
    if base_is_dst:
        for (_, se), (_, de) in zip(s_nu, d_nu):
            si, di = ir.int_value(se), ir.int_value(de)
            if si is not None and di is not None and di < si:
                raise error(ValueError, f"{what}: Selected loop range is smaller than original "
                                        f"src range at matched non-1 dimension: {_fmt_ext(dst_r)}"
                                        f" < {_fmt_ext(src_r)}")
    base_extents = [e for _, e in base]
    return _with_extents(src_r, base_extents), _with_extents(dst_r, base_extents)


def _fmt_ext(r):
    return f"{r.buffer.name}{[e for e in r.extents]}"


def _shapes_equal(a, b):
    if len(a) != len(b):
        return False
    return all(ir.structural_equal(ir.as_expr(x), ir.as_expr(y)) for x, y in zip(a, b))


# ---- copy / fill ----------------------------------------------------------------------------


_PREFERRED_INSTRUCTIONS = ("tma", "cp_async", "sync")


def copy(src, dst, coalesced_width=None, disable_tma=False, eviction_policy=None,
         loop_layout=None, prefer_instruction=None, annotations=None, **kwargs):
    """Copy (with conversion to dst's dtype) between global, shared and fragment tiles.

    The copy is synchronous whatever instruction performs it. `prefer_instruction="tma"`
    (sm_90a) makes a global -> shared copy one TMA transfer issued by one thread and waited
    for by all on an mbarrier of its own, and a shared -> global copy a TMA store waited for
    (reads of the tile done) before the tile is reused: a 1-D bulk copy when both regions are
    contiguous, provably inside the tensor and 16-byte aligned, else a tensor-map box copy
    (elements outside the tensor read 0 / are not written); a copy TMA cannot perform is a
    located error. Without a preference, a shared -> global copy on sm_90a is a TMA store when
    it can be one (`disable_tma=True` or `prefer_instruction="sync"` keep the threads'
    stores). `annotations` may carry the same keys (they take precedence)."""
    ann = dict(annotations or {})
    coalesced_width = ann.pop("coalesced_width", coalesced_width)
    disable_tma = ann.pop("disable_tma", disable_tma)
    eviction_policy = ann.pop("eviction_policy", eviction_policy)
    prefer_instruction = ann.pop("prefer_instruction", prefer_instruction)
    if prefer_instruction is not None and prefer_instruction not in _PREFERRED_INSTRUCTIONS:
        raise error(ValueError, f"T.copy prefer_instruction must be one of "
                                f"{_PREFERRED_INSTRUCTIONS}, got {prefer_instruction!r}")
    if prefer_instruction == "tma" and disable_tma:
        raise error(ValueError, 'T.copy prefer_instruction="tma" conflicts with '
                                "disable_tma=True")
    pair = pair_regions(src, dst)
    # one element to one element is an assignment, allowed inside T.Parallel as in the reference
    _check_tile_context("T.copy", elementwise=pair is None)
    if pair is None:
        s_buf, s_idx = _start_point(src)
        d_buf, d_idx = _start_point(dst)
        emit(ir.Store, d_buf, tuple(d_idx), ir.cast_to(ir.Load(s_buf, tuple(s_idx),
                                                               s_buf.dtype), d_buf.dtype))
        return
    opts = [("disable_tma", bool(disable_tma))]
    if coalesced_width is not None:
        opts.append(("coalesced_width", coalesced_width))
    if eviction_policy is not None:
        opts.append(("eviction_policy", eviction_policy))
    if prefer_instruction is not None:
        opts.append((ir.PREFER_INSTRUCTION, prefer_instruction))
    emit(ir.Copy, pair[0], pair[1], tuple(opts))


_EVICTION_POLICIES = ("evict_normal", "evict_first", "evict_last")


def tma_copy(src, dst, *, barrier=None, cluster_mask=None, leader_scope_threads=None,
             eviction_policy=None, annotations=None):
    """One TMA transfer with user-managed synchronisation (sm_90a), issued by one thread of
    the enclosing region (the block, a `T.ws` role or a thread-range branch such as
    `if tx < 128:`), or one per group of `leader_scope_threads` threads.

    A load (global -> shared) adds the tile's bytes to the transaction count of `barrier`
    (an element of `T.alloc_barrier`, required) and starts the transfer; it neither arrives
    nor waits. The user arrives (`T.barrier_arrive`) and waits (`T.mbarrier_wait_parity`) on
    that barrier: the phase completes when the arrivals are in and the bytes have landed. A
    store (shared -> global) starts the transfer and commits it as a bulk group, without
    waiting (`T.tma_store_wait`); the shared tile's writers must have been fenced
    (`T.fence_proxy_async`) and synchronised first. Elements of the box outside the tensor
    read as 0 and are not written. With `cluster_mask` (a load in a `T.ClusterKernel`; bit r:
    the block of rank r), the lowest-ranked block of the mask multicasts its tile into the
    same shared tile of every block of the mask, the others in the mask issue nothing and
    blocks outside it load their own; every block adds the bytes to its own `barrier`. On the
    CPU interpreter the transfer happens at once (a multicast lands in a peer when the peer
    reaches its own T.tma_copy or waits on the barrier)."""
    _check_tile_context("T.tma_copy")
    ann = dict(annotations or {})
    barrier = ann.pop("barrier", barrier)
    cluster_mask = ann.pop("cluster_mask", cluster_mask)
    leader_scope_threads = ann.pop("leader_scope_threads", leader_scope_threads)
    eviction_policy = ann.pop("eviction_policy", eviction_policy)
    if ann:
        raise error(ValueError, f"T.tma_copy: unknown annotations {sorted(ann)}")
    if cluster_mask is not None:
        _check_cluster_mask(cluster_mask, "T.tma_copy")
    if leader_scope_threads is not None and (
            not isinstance(leader_scope_threads, int) or leader_scope_threads <= 0
            or leader_scope_threads % 32):
        raise error(ValueError, f"T.tma_copy leader_scope_threads must be a positive multiple "
                                f"of 32 (whole warps), got {leader_scope_threads!r}")
    if eviction_policy is not None and eviction_policy not in _EVICTION_POLICIES:
        raise error(ValueError, f"T.tma_copy eviction_policy must be one of "
                                f"{_EVICTION_POLICIES}, got {eviction_policy!r}")
    pair = pair_regions(src, dst, "T.tma_copy")
    if pair is None:
        raise error(ValueError, "T.tma_copy copies a tile, not a single element")
    src_r, dst_r = pair
    kinds = (src_r.buffer.scope, dst_r.buffer.scope)
    shared = ("shared", "shared.dyn")
    load = kinds[0] == "global" and kinds[1] in shared
    if not load and not (kinds[0] in shared and kinds[1] == "global"):
        raise error(ValueError, f"T.tma_copy copies global -> shared or shared -> global, got "
                                f"{kinds[0]} {src_r.buffer.name} -> {kinds[1]} "
                                f"{dst_r.buffer.name}")
    if src_r.buffer.dtype is not dst_r.buffer.dtype:
        raise error(TypeError, f"T.tma_copy does not convert: {src_r.buffer.name} is "
                               f"{src_r.buffer.dtype}, {dst_r.buffer.name} is "
                               f"{dst_r.buffer.dtype}")
    bar = None
    if load:
        if barrier is None:
            raise error(ValueError, "T.tma_copy of a load needs barrier=: the mbarrier "
                                    "(T.alloc_barrier) whose phase counts its bytes")
        from .misc import barrier_load

        bar = barrier_load(barrier, "T.tma_copy(barrier=...)")
    elif barrier is not None:
        raise error(ValueError, "T.tma_copy of a store takes no barrier: wait for it with "
                                "T.tma_store_wait()")
    elif cluster_mask is not None:
        raise error(ValueError, "T.tma_copy(..., cluster_mask=...) multicasts a load; a store "
                                "takes no cluster_mask")
    emit(ir.TmaCopy, src_r, dst_r, bar, leader_scope_threads, None, eviction_policy,
         cluster_mask=cluster_mask)


def _check_cluster_mask(mask, what):
    """`mask` is a non-zero int naming blocks of the enclosing T.ClusterKernel's cluster."""
    kernel = current_builder(what=what).kernel.data["kernel"]
    dims = kernel.cluster_dims or (1, 1, 1)
    size = dims[0] * dims[1] * dims[2]
    if isinstance(mask, bool) or not isinstance(mask, int) or not 0 < mask < (1 << size):
        raise error(ValueError, f"{what}: cluster_mask must be a non-zero int of {size} bits "
                                f"(the cluster's blocks), got {mask!r}")
    return dims


def copy_cluster(src, dst, *, dst_block=None, cluster_mask=None, remote_barrier=None,
                 eviction_policy=None, coalesced_width=None, annotations=None,
                 loop_layout=None):
    """A global -> shared tile copy in a `T.ClusterKernel` whose blocks in `cluster_mask`
    (bit r: the block of rank r in the cluster) all receive the tile of the lowest-ranked of
    them, as the reference's TMA multicast does; blocks outside the mask copy their own tile.
    The source coordinates are those the leader computes (its block indices in place of each
    receiver's). Here each block loads the leader's tile itself: the same data, without the
    multicast's saving in global-memory traffic. Without `cluster_mask` it is `T.copy`.
    With `dst_block=r` it copies a shared tile of this block into the shared tile `dst` of
    block r of the cluster (distributed shared memory; see language/cluster_copy.py), one
    arrival on the peer's `remote_barrier` when given."""
    _check_tile_context("T.copy_cluster")
    ann = dict(annotations or {})
    dst_block = ann.pop("dst_block", dst_block)
    cluster_mask = ann.pop("cluster_mask", cluster_mask)
    remote_barrier = ann.pop("barrier", remote_barrier)
    eviction_policy = ann.pop("eviction_policy", eviction_policy)
    coalesced_width = ann.pop("coalesced_width", coalesced_width)
    if ann:
        raise error(ValueError, f"T.copy_cluster: unknown annotations {sorted(ann)}")
    if dst_block is not None or remote_barrier is not None:
        if dst_block is None:
            raise error(ValueError, "T.copy_cluster(..., remote_barrier=...) needs dst_block=: "
                                    "the peer block whose barrier it arrives on")
        if cluster_mask is not None:
            raise error(ValueError, "T.copy_cluster takes dst_block= (a copy into a peer's "
                                    "shared memory) or cluster_mask= (a multicast load), "
                                    "not both")
        from .cluster_copy import copy_to_peer

        pair = pair_regions(src, dst, "T.copy_cluster")
        if pair is None:
            raise error(ValueError, "T.copy_cluster(..., dst_block=...) copies a tile, not a "
                                    "single element")
        copy_to_peer(pair[0], pair[1], dst_block, remote_barrier)
        return
    if cluster_mask is None:
        copy(src, dst, coalesced_width=coalesced_width, eviction_policy=eviction_policy,
             loop_layout=loop_layout)
        return
    b = current_builder(what="T.copy_cluster")
    kernel = b.kernel.data["kernel"]
    dims = _check_cluster_mask(cluster_mask, "T.copy_cluster")
    pair = pair_regions(src, dst, "T.copy_cluster")
    if pair is None or pair[0].buffer.scope != "global" or \
            pair[1].buffer.scope not in ("shared", "shared.dyn"):
        raise error(ValueError, "T.copy_cluster(..., cluster_mask=...) copies a global tile "
                                "into shared memory")
    src_r, dst_r = pair
    leader = (cluster_mask & -cluster_mask).bit_length() - 1
    leader_at = (leader % dims[0], leader // dims[0] % dims[1], leader // (dims[0] * dims[1]))
    # each block index of a receiver, as the leader's: its cluster's origin plus the leader's
    # position in it
    block_vars = kernel.block_vars + (ir.const(0),) * (3 - len(kernel.block_vars))
    at = [ir.binary("floormod", v, d) for v, d in zip(block_vars, dims)]
    rank = ir.binary("add", ir.binary("mul", ir.binary("add", ir.binary("mul", at[2], dims[1]),
                                                           at[1]), dims[0]), at[0])
    receives = ir.compare("ne", ir.binary("bitand", ir.binary("shr", ir.const(cluster_mask),
                                                              rank), 1), 0)
    from ..ir.visitor import substitute

    as_leader = {v: ir.select(receives, ir.binary("add", ir.binary("sub", v, a), la), v)
                 for v, a, la, d in zip(kernel.block_vars, at, leader_at, dims) if d > 1}
    lets = {}
    for frame in b.frames:
        for item in frame.items:
            if isinstance(item, tuple) and item[0] == "let":
                lets[item[1]] = item[2]

    def leaders(e):
        e = ir.as_expr(e)
        for _ in range(len(lets) + 1):  # lets of lets, innermost last
            inlined = substitute(e, lets)
            if inlined is e:
                break
            e = inlined
        return substitute(e, as_leader)

    region = tuple((leaders(start), extent) for start, extent in src_r.region)
    copy(ir.BufferRegion(src_r.buffer, region), dst_r, coalesced_width=coalesced_width,
         eviction_policy=eviction_policy, loop_layout=loop_layout)


def async_copy(src, dst, **kwargs):
    """`T.copy` of global memory into shared memory (the only copy cp.async makes; anything
    else is an error, as in the reference). Here it completes before the next statement: the
    copies of a pipeline are asynchronous wherever it allows anyway."""
    _check_tile_context("T.async_copy")
    s_buf, d_buf = (x if isinstance(x, ir.Buffer) else getattr(x, "buffer", None)
                    for x in (src, dst))
    if s_buf is not None and d_buf is not None and (
            s_buf.scope != "global" or d_buf.scope not in ("shared", "shared.dyn")):
        defer_error(ValueError, f"T.async_copy only supports global->shared/shared.dyn copies "
                                f"(cp.async), got {s_buf.scope} {s_buf.name} -> {d_buf.scope} "
                                f"{d_buf.name}; use T.copy")
    copy(src, dst, **kwargs)


def c2d_im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad,
               eviction_policy=None):
    """The im2col tile of a 2-D convolution over an NHWC image: `col[i, j]` is the input
    element that output pixel m = nhw_step * block_M + i (over N x OH x OW) multiplies with
    reduction index k = c_step * block_K + j (over KH x KW x C, channels fastest) of a square
    `kernel` with the given stride, dilation and padding; 0 in the padding and past M or K.
    Written as a `T.Parallel` gather, so inside `T.Pipelined` it becomes a zero-filling
    cp.async stage like a hand-written one; in a warp-specialised pipeline on sm_90a, one TMA
    load in im2col mode where the shapes allow."""
    from .loops import Parallel, _Parallel, _range_dims
    from .math import if_then_else

    if not isinstance(img, ir.Buffer) or len(img.shape) != 4:
        raise error(TypeError, "T.c2d_im2col needs the (N, H, W, C) image tensor first")
    if not isinstance(col, ir.Buffer) or len(col.shape) != 2:
        raise error(TypeError, "T.c2d_im2col writes a 2-D (block_M, block_K) tile")
    N, H, W, C = img.shape
    block_M, block_K = col.shape
    OH = (H + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    OW = (W + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    M, K = N * OH * OW, kernel * kernel * C
    # what the gather means, for TMA's im2col mode on sm_90a (transform/warp_specialize/tma_im2col.py)
    spec = (img, nhw_step * block_M, c_step * block_K, kernel, stride, dilation, pad)
    dims = _range_dims(block_M, None, None, "T.c2d_im2col") + \
        _range_dims(block_K, None, None, "T.c2d_im2col")
    for i, j in _Parallel(dims, [("im2col", spec)]):
        m = nhw_step * block_M + i
        k = c_step * block_K + j
        ih = m % (OH * OW) // OW * stride + k // (kernel * C) * dilation - pad
        iw = m % OW * stride + k // C % kernel * dilation - pad
        inside = ir.logical_and(ir.logical_and(m < M, k < K), ir.logical_and(
            ir.logical_and(ih >= 0, ih < H), ir.logical_and(iw >= 0, iw < W)))
        col[i, j] = if_then_else(inside, img[m // (OH * OW), ih, iw, k % C], 0)


im2col = c2d_im2col


def fill(buffer, value):
    """Set every element of a buffer or region to `value` (cast to its dtype)."""
    _check_tile_context("T.fill")
    region = to_region(buffer, "T.fill")
    if region is None:
        region = ir.BufferRegion(buffer.buffer, tuple((i, 1) for i in buffer.indices))
    else:
        _check_tile_start(region, "T.fill")
    note_legacy_use(region.buffer, "T.fill (or T.clear) of")
    emit(ir.Fill, region, ir.cast_to(value, region.buffer.dtype))


def clear(buffer):
    """`T.fill(buffer, 0)`."""
    fill(buffer, 0)


# ---- gemm -----------------------------------------------------------------------------------


class GemmWarpPolicy:
    """How warps split the block's gemm tile; affects performance only."""

    Square = "Square"
    FullRow = "FullRow"
    FullCol = "FullCol"

    @classmethod
    def from_warp_partition(cls, *args, **kwargs):
        return cls.Square


def _gemm_shape(region: ir.BufferRegion, name: str, op: str = "T.gemm"):
    ext = [ir.int_value(e) for e in region.extents]
    if any(e is None for e in ext):
        raise error(ValueError, f"{op} operand {name} ({region.buffer.name}) must have static "
                                f"extents, got {list(region.extents)}")
    if len(ext) < 2 or any(e != 1 for e in ext[:-2]):
        raise error(ValueError, f"{op} operand {name} ({region.buffer.name}) must be 2-D "
                                f"(leading dims of extent 1 allowed), got {ext}")
    return ext[-2], ext[-1]


_GEMM_SCOPES = ("shared", "shared.dyn", "local.fragment")


def _gemm_regions(op: str, operands):
    """The regions of `operands` ((value, name, allowed scopes) each) of a gemm."""
    regions = []
    for x, name, scopes in operands:
        r = to_region(x, op)
        if r is None:
            raise error(TypeError, f"{op} operand {name} must be a buffer or a region")
        _check_tile_start(r, op)
        if r.buffer.scope not in scopes:
            where = "in shared memory" if "local.fragment" not in scopes else \
                "in shared memory or fragments"
            raise error(ValueError, f"{op} operand {name} ({r.buffer.name}) is a "
                                    f"{r.buffer.scope} buffer; it must be a tile {where}: "
                                    "T.copy it into one first")
        regions.append(r)
    return regions


def _check_gemm_shapes(op: str, a_mk, b_kn, c_mn, k_a_name="K_A"):
    (am, ak), (bk, bn), (cm, cn) = a_mk, b_kn, c_mn
    if ak != bk:
        raise error(AssertionError, f"{op} K shape check failed: {k_a_name} = {ak}, K_B = {bk}")
    if am != cm:
        raise error(AssertionError, f"{op} M shape check failed: M_A = {am}, M_C = {cm}")
    if bn != cn:
        raise error(AssertionError, f"{op} N shape check failed: N_B = {bn}, N_C = {cn}")


def _gemm_options(policy, clear_accum, k_pack, wg_wait):
    if isinstance(policy, int):
        policy = ("Square", "FullRow", "FullCol")[policy]
    clear = clear_accum if isinstance(clear_accum, ir.Expr) else bool(clear_accum)
    return str(policy), clear, int(k_pack), int(wg_wait)


def _oriented(shape, transposed):
    return shape[::-1] if transposed else shape


def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
         clear_accum=False, k_pack=1, wg_wait=0, mbar=None, use_wgmma=None, **kwargs):
    """`C += op(A) @ op(B)` on tiles (`C = ...` with clear_accum=True); C accumulates in its
    own dtype."""
    _gemm("T.gemm", A, B, C, transpose_A, transpose_B, policy, clear_accum, k_pack, wg_wait)


def _gemm(what, A, B, C, transpose_A, transpose_B, policy, clear_accum, k_pack, wg_wait,
          require_wgmma=False):
    _check_tile_context(what)
    a, b, c = _gemm_regions(what, [(x, name, _GEMM_SCOPES)
                                       for x, name in ((A, "A"), (B, "B"), (C, "C"))])
    problem = gemm_dtype_problem(a.buffer.dtype, b.buffer.dtype, c.buffer.dtype)
    if problem:
        raise error(TypeError, f"{what}: {problem}")
    if a.buffer.dtype.name == "float64" and "local.fragment" in (a.buffer.scope, b.buffer.scope):
        # the CUDA-core gemm (codegen/gemm_sm80.py) reads both operands from shared memory;
        # one rule for both targets
        raise error(NotImplementedError, "T.gemm on float64 operands takes A and B from shared "
                                         "memory; copy the register operand to a shared tile")
    _check_gemm_shapes(what, _oriented(_gemm_shape(a, "A"), transpose_A),
                       _oriented(_gemm_shape(b, "B"), transpose_B), _gemm_shape(c, "C"))
    emit(ir.Gemm, a, b, c, bool(transpose_A), bool(transpose_B),
         *_gemm_options(policy, clear_accum, k_pack, wg_wait), require_wgmma=require_wgmma)


def gemm_sp(A_sparse, E, B, C, transpose_A=False, transpose_E=False, transpose_B=False,
            policy=GemmWarpPolicy.Square, clear_accum=False, k_pack=1, wg_wait=0,
            annotations=None):
    """`C += op(A) @ op(B)` with A 2:4 structured sparse along K (1:2 for float32), given as
    its kept values `A_sparse` and their positions `E` (the reference compressor's metadata);
    mma.sp on sm_80+.

    `A_sparse` (M x K/2, or K/2 x M with transpose_A) holds the kept elements of each group of
    4 (2) consecutive elements of a row in order, and the metadata `E` (M x K/e, or K/e x M
    with transpose_E; e = get_e_factor(A dtype, E dtype)) their positions: 4 bits per group,
    from the lowest bits of each E integer up, holding the two kept indices (first in the low
    2 bits, increasing; 0b0100 / 0b1110 for the kept first / second element of a float32
    pair). A group whose bits are all zero keeps its first two elements (first one for
    float32): zero-filled padding decompresses to zeros. E is a shared tile; A_sparse and B
    are shared tiles or fragments."""
    from ..cuda.intrinsics.sparse_layout import GROUP_CONFIG, get_e_factor

    _check_tile_context("T.gemm_sp")
    a, e, b, c = _gemm_regions("T.gemm_sp", (
        (A_sparse, "A_sparse", _GEMM_SCOPES), (E, "E", ("shared", "shared.dyn")),
        (B, "B", _GEMM_SCOPES), (C, "C", _GEMM_SCOPES)))
    adt, edt = a.buffer.dtype, e.buffer.dtype
    if adt not in GROUP_CONFIG:
        raise error(TypeError, f"T.gemm_sp: A_sparse has dtype {adt}; structured sparsity is "
                               "defined for " + ", ".join(sorted(GROUP_CONFIG)))
    if not (edt.is_int and edt.lanes == 1 and edt.bits in (8, 16, 32)):
        raise error(TypeError, f"T.gemm_sp: the metadata E ({e.buffer.name}) must hold 8-, 16- "
                               f"or 32-bit integers, got {edt}")
    problem = gemm_dtype_problem(adt, b.buffer.dtype, c.buffer.dtype)
    if problem:
        raise error(TypeError, f"T.gemm_sp: {problem}")
    am, ak = _oriented(_gemm_shape(a, "A_sparse", "T.gemm_sp"), transpose_A)
    K = 2 * ak
    _check_gemm_shapes("T.gemm_sp", (am, K), _oriented(_gemm_shape(b, "B", "T.gemm_sp"),
                                                       transpose_B),
                       _gemm_shape(c, "C", "T.gemm_sp"), k_a_name="K_A (wo sparse)")
    em, ek = _oriented(_gemm_shape(e, "E", "T.gemm_sp"), transpose_E)
    e_factor = get_e_factor(adt, edt)
    if K % e_factor or ek != K // e_factor or em != am:
        want = _oriented((am, f"K/{e_factor}" if K % e_factor else K // e_factor), transpose_E)
        raise error(ValueError, f"T.gemm_sp: the metadata E ({e.buffer.name}) of a {am} x {K} "
                                f"{adt} operand with {edt} metadata ({e_factor} elements per "
                                f"{edt}) is {want[0]} x {want[1]}, got "
                                f"{[ir.int_value(x) for x in e.extents[-2:]]}" +
                                (f"; K = {K} must be a multiple of {e_factor}"
                                 if K % e_factor else ""))
    emit(ir.GemmSp, a, b, c, bool(transpose_A), bool(transpose_B),
         *_gemm_options(policy, clear_accum, k_pack, wg_wait), E=e,
         trans_E=bool(transpose_E))


def wgmma_gemm_sp(A_sparse, E, B, C, transpose_A=False, transpose_E=False, transpose_B=False,
                  policy=GemmWarpPolicy.Square, clear_accum=False, annotations=None):
    """`T.gemm_sp`, complete when it returns (a later `T.wait_wgmma` has nothing to wait
    for)."""
    gemm_sp(A_sparse, E, B, C, transpose_A, transpose_E, transpose_B, policy, clear_accum)


def gemm_v1(*args, **kwargs):
    """`T.gemm` (the reference's first gemm implementation; same results here)."""
    gemm(*args, **kwargs)


gemm_v2 = gemm_v1


def wgmma_gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
               clear_accum=False, annotations=None):
    """`T.gemm` on wgmma, issued without waiting: C is complete after `T.wait_wgmma(0)` (the
    compiler still waits before C is touched if the program does not). A gemm wgmma cannot do
    (a target other than sm_90a, M not a multiple of 64 rows per warpgroup, threads not whole
    warpgroups, B not in shared memory) is a located error when compiled for CUDA, where
    `T.gemm` would use mma.sync; the CPU interpreter computes it as `T.gemm`."""
    _gemm("T.wgmma_gemm", A, B, C, transpose_A, transpose_B, policy, clear_accum, 1, -1,
          require_wgmma=True)


# ---- reductions and scans ---------------------------------------------------------------------


def _reduce(kind, src, dst, dim, clear, nan_propagate=False, batch=1):
    _check_tile_context(f"T.reduce_{kind}")
    # `batch` groups the reference's cross-thread AllReduce calls (fewer barriers); here every
    # reduction of one statement is combined together anyway, so it only has to be valid
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise error(ValueError, f"T.reduce_{kind}: batch must be >= 1 (an int), got {batch!r}")
    for x, role in ((src, "src"), (dst, "dst")):
        if not isinstance(x, ir.Buffer):
            raise error(TypeError, f"T.reduce_{kind} {role} must be a buffer, got {x!r}")
        allowed = ("local.fragment", "shared", "shared.dyn", "local") + (
            ("local.var",) if role == "dst" else ())
        if x.scope not in allowed:
            raise error(ValueError, f"T.reduce_{kind} {role} {x.name} must be a fragment, "
                                    f"shared or local buffer, got scope {x.scope}")
    nd = src.ndim
    if not -nd <= dim < nd:
        raise error(ValueError, f"T.reduce_{kind}: dim {dim} out of range for a {nd}-D buffer")
    dim = dim % nd
    expect1 = [s for i, s in enumerate(src.shape) if i != dim]
    expect2 = [s if i != dim else 1 for i, s in enumerate(src.shape)]
    got = list(dst.shape)
    if not (_shapes_equal(got, expect1) or _shapes_equal(got, expect2) or
            (not expect1 and _shapes_equal(got, [1]))):
        raise error(ValueError, f"Invalid reduce output shape, buffer shape is "
                                f"{tuple(src.shape)}, dim is {dim}, output shape is {got}, "
                                f"expected shapes are {expect1} or {expect2}")
    annotated = _annotated_layout(src)
    problem = annotated.misaligned_reduce(dim) if hasattr(annotated, "misaligned_reduce") \
        else None
    if problem:
        raise error(ValueError, f"T.reduce_{kind} of {src.name} {problem}")
    if kind in ("bitand", "bitor", "bitxor") and not (src.dtype.is_int or src.dtype.is_bool):
        raise error(TypeError, f"T.reduce_{kind} needs an integer buffer, got {src.dtype}")
    emit(ir.Reduce, kind, src, dst, dim, bool(clear), bool(nan_propagate))


def _annotated_layout(buf):
    """The layout T.annotate_layout gave `buf` so far in this kernel, or None."""
    attrs = current_builder(what="a tile operation").kernel.data["attrs"]
    return next((lay for key, val in reversed(attrs) if key == "layout"
                 for b, lay in (val,) if b is buf), None)


def reduce_max(src, dst, dim=-1, clear=True, batch=1, nan_propagate=False, annotations=None):
    """Maximum of `src` along `dim` into `dst` (the dim removed or kept as 1). `clear=False`
    folds the previous contents of `dst` in."""
    _reduce("max", src, dst, dim, clear, nan_propagate, batch)


def reduce_min(src, dst, dim=-1, clear=True, batch=1, nan_propagate=False, annotations=None):
    """Minimum of `src` along `dim` into `dst`; see T.reduce_max."""
    _reduce("min", src, dst, dim, clear, nan_propagate, batch)


def reduce_sum(src, dst, dim=-1, clear=True, batch=1, annotations=None):
    """Sum of `src` along `dim` into `dst`; `clear=False` adds to what `dst` holds."""
    _reduce("sum", src, dst, dim, clear, batch=batch)


def reduce_abssum(src, dst, dim=-1, batch=1, annotations=None):
    """Sum of absolute values of `src` along `dim` into `dst`."""
    _reduce("abssum", src, dst, dim, True, batch=batch)


def reduce_absmax(src, dst, dim=-1, clear=True, batch=1, nan_propagate=False, annotations=None):
    """Largest absolute value of `src` along `dim` into `dst`."""
    _reduce("absmax", src, dst, dim, clear, nan_propagate, batch)


def reduce_bitand(src, dst, dim=-1, clear=True, batch=1, annotations=None):
    """Bitwise AND of an integer `src` along `dim` into `dst`."""
    _reduce("bitand", src, dst, dim, clear, batch=batch)


def reduce_bitor(src, dst, dim=-1, clear=True, batch=1, annotations=None):
    """Bitwise OR of an integer `src` along `dim` into `dst`."""
    _reduce("bitor", src, dst, dim, clear, batch=batch)


def reduce_bitxor(src, dst, dim=-1, clear=True, batch=1, annotations=None):
    """Bitwise XOR of an integer `src` along `dim` into `dst`."""
    _reduce("bitxor", src, dst, dim, clear, batch=batch)


def reduce(src, dst, reduce_type="sum", dim=-1, clear=True, batch=1, nan_propagate=False,
           annotations=None):
    """Reduction named by `reduce_type` ("sum", "max", "min", "abssum", "absmax", "bitand",
    "bitor", "bitxor") of `src` along `dim` into `dst`."""
    _reduce(reduce_type, src, dst, dim, clear, nan_propagate, batch)


def _scan(kind, src, dst, dim, reverse, annotations=None):
    name = f"T.cum{kind}"
    if annotations is not None and not isinstance(annotations, dict):
        raise error(TypeError, f"{name}: annotations must be a dict, got {annotations!r}")
    notes = tuple(sorted((str(k), v) for k, v in (annotations or {}).items()))
    _check_tile_context(name)
    if dst is None:
        dst = src
    if isinstance(src, ir.BufferRegion) or isinstance(dst, ir.BufferRegion):
        _scan_regions(kind, src, dst, dim, reverse, name, annotations)
        return
    for x in (src, dst):
        if not isinstance(x, ir.Buffer):
            raise error(TypeError, f"{name} operands must be buffers, got {x!r}")
    nd = src.ndim
    if not -nd <= dim < nd:
        raise error(ValueError, f"{name}: dim {dim} out of range for a {nd}-D buffer")
    if not _shapes_equal(src.shape, dst.shape):
        raise error(ValueError, f"{name}: dst shape {list(dst.shape)} must equal src shape "
                                f"{list(src.shape)}")
    emit(ir.CumSum, src, dst, dim % nd, bool(reverse), kind, notes)


def _scan_regions(kind, src, dst, dim, reverse, name, annotations):
    """A scan of a region (`big[0:M, 0:N]`): through a tile of the region's shape in the
    source's memory (copied in, scanned, copied out)."""
    from .alloc import alloc_fragment, alloc_shared

    regions = [to_region(x, name) for x in (src, dst)]
    shape = [ext for _, ext in regions[0].region]
    if not _shapes_equal(shape, [ext for _, ext in regions[1].region]):
        raise error(ValueError, f"{name}: dst region {[e for _, e in regions[1].region]} must "
                                f"have the src region's shape {shape}")
    if not all(isinstance(e, int) for e in shape):
        raise error(ValueError, f"{name} of a region needs static extents, got {shape}")
    scope = regions[0].buffer.scope
    alloc = alloc_fragment if scope == "local.fragment" else alloc_shared
    tile = alloc(shape, regions[0].buffer.dtype)
    copy(regions[0], tile)
    _scan(kind, tile, tile, dim, reverse, annotations)
    copy(tile, regions[1])


def cumsum(src, dst=None, dim=0, reverse=False, annotations=None):
    """Inclusive prefix sum along `dim` (default 0); `reverse=True` gives suffix sums. `src`
    and `dst` are tiles or regions of tiles (`big[0:M, 0:N]`); `annotations` (a dict) are kept
    and printed by `.script()` (no lowering options exist here)."""
    _scan("sum", src, dst, dim, reverse, annotations)


def cummax(src, dst=None, dim=0, reverse=False, annotations=None):
    """Inclusive running maximum along `dim`; `reverse=True` runs from the end (annotations:
    as T.cumsum)."""
    _scan("max", src, dst, dim, reverse, annotations)


# ---- atomics ----------------------------------------------------------------------------------


def _element(x):
    if isinstance(x, ir.Load):
        return x
    if getattr(x, "__tl_ref__", False):
        return x.__tl_expr__()
    if isinstance(x, ir.Buffer) and x.scope == "local.var":
        return ir.Load(x, (ir.const(0),), x.dtype)
    return None


def _check_atomic_dtype(name, target):
    """Only element types the atomic instructions have (int8 or bool would reach the CUDA
    compiler as a static_assert in the header, with no line of the user's)."""
    buf = getattr(target, "buffer", target)
    dt = getattr(buf, "dtype", None) or getattr(target, "dtype", None)
    if dt is not None and dt.name not in ATOMIC_DTYPES[name]:
        raise error(TypeError, f"T.{name} on {getattr(buf, 'name', 'a value')} of dtype {dt}: "
                               f"atomics exist for {', '.join(ATOMIC_DTYPES[name])}")


def _check_tma_add_dtype(dst):
    buf = getattr(dst, "buffer", dst)
    dt = getattr(buf, "dtype", None)
    if dt is not None and dt.name not in TMA_ADD_DTYPES:
        raise error(TypeError, f"TMA atomic add does not support dtype {dt}; supported scalar "
                               f"dtypes are {', '.join(TMA_ADD_DTYPES)} "
                               f"(T.atomic_add into {getattr(buf, 'name', 'a value')} with "
                               "use_tma=True)")


_MEMORY_ORDERS = ("relaxed", "consume", "acquire", "release", "acq_rel", "seq_cst")
_LOAD_ORDERS = ("relaxed", "consume", "acquire", "seq_cst")
_STORE_ORDERS = ("relaxed", "release", "seq_cst")


def _memory_order(what, order, allowed=_MEMORY_ORDERS):
    if order is None:
        return "relaxed"
    if order not in allowed:
        raise error(ValueError, f"{what} does not support memory_order={order!r}; use one of "
                                f"{', '.join(allowed)}")
    return order


def _atomic(op, dst, value, memory_order=None, return_prev=False, use_tma=False):
    memory_order = _memory_order(f"T.atomic_{op}", memory_order)
    b = current_builder(what=f"T.atomic_{op}")
    if not b.in_kernel():
        raise error(RuntimeError, f"T.atomic_{op} must be inside `with T.Kernel(...)`")
    if use_tma:
        _check_tma_add_dtype(dst)
    _check_atomic_dtype(f"atomic_{op}", dst)
    elem = _element(dst)
    tile_value = isinstance(value, (ir.Buffer, ir.BufferRegion)) and not (
        isinstance(value, ir.Buffer) and value.scope == "local.var")
    if elem is not None and tile_value:
        # T.atomic_add(C[i0, j0], tile): a start point and a tile (split-K epilogues)
        if return_prev:
            raise error(NotImplementedError, f"T.atomic_{op} with return_prev=True needs a "
                                             "single element destination, not a tile")
        _check_tile_context(f"T.atomic_{op}")
        pair = pair_regions(value, dst, f"T.atomic_{op}")
        emit(ir.AtomicTile, op, pair[0], pair[1], memory_order or "relaxed", bool(use_tma))
        return None
    if elem is not None:
        v = ir.cast_to(value, elem.dtype)
        attrs = (("memory_order", memory_order or "relaxed"),)
        c = ir.Call(f"atomic_{op}", (elem, v), elem.dtype, attrs)
        if return_prev:
            return b.let("prev", c)
        emit(ir.Evaluate, c)
        return None
    if return_prev:
        raise error(NotImplementedError, f"T.atomic_{op} with return_prev=True needs a single "
                                         "element destination, not a tile")
    _check_tile_context(f"T.atomic_{op}")
    if isinstance(value, (ir.Buffer, ir.BufferRegion)) and not (
            isinstance(value, ir.Buffer) and value.scope == "local.var"):
        pair = pair_regions(value, dst, f"T.atomic_{op}")
        emit(ir.AtomicTile, op, pair[0], pair[1], memory_order or "relaxed", bool(use_tma))
        return None
    region = to_region(dst, f"T.atomic_{op}")
    emit(ir.AtomicTile, op, ir.cast_to(value, region.buffer.dtype), region,
         memory_order or "relaxed")
    return None


def transpose(src, dst):
    """`dst[j, i] = src[i, j]` for a 2-D tile `src` of shape (M, N) into `dst` of shape (N, M)
    (shared memory or fragments), by all the block's threads; `dst` holds the result for the
    next statement."""
    from .loops import Parallel

    _check_tile_context("T.transpose")
    for x, role in ((src, "src"), (dst, "dst")):
        if not isinstance(x, ir.Buffer) or x.ndim != 2:
            raise error(TypeError, f"T.transpose {role} must be a 2-D buffer, got {x!r}")
    m, n = src.shape
    if not (_shapes_equal(dst.shape, [n, m])):
        raise error(ValueError, f"T.transpose: dst {dst.name} has shape {list(dst.shape)}, "
                                f"the transpose of src {src.name} {list(src.shape)} needs "
                                f"{[n, m]}")
    for j, i in Parallel(n, m).trace(("j", "i")):
        dst[j, i] = src[i, j]


def store_cluster_sum(dst, src, use_tma=True):
    """`dst` = the sum of the shared tile `src` over the blocks of this block's cluster
    (`T.ClusterKernel`), every block of the cluster naming the same `dst` region: the
    cluster's first block stores its tile, the others add theirs (with the TMA unit where it
    applies, else element-wise atomics) once it is in memory. `dst`'s old contents are never
    read, so a split-K GEMM whose K slices form a cluster needs no zeroed output. In a plain
    `T.Kernel` (a cluster of one) it is a copy. Needs sm_90 for clusters of more than one
    (before it, zero the output and use `T.atomic_add`)."""
    b = current_builder(what="T.store_cluster_sum")
    if not b.in_kernel():
        raise error(RuntimeError, "T.store_cluster_sum must be inside `with T.Kernel(...)`")
    _check_tile_context("T.store_cluster_sum")
    src_region, dst_region = pair_regions(src, dst, "T.store_cluster_sum")
    if src_region.buffer.scope not in ("shared", "shared.dyn"):
        raise error(ValueError, f"T.store_cluster_sum adds shared tiles; {src_region.buffer.name} "
                                f"is {src_region.buffer.scope}")
    if dst_region.buffer.scope != "global":
        raise error(ValueError, f"T.store_cluster_sum writes global memory; "
                                f"{dst_region.buffer.name} is {dst_region.buffer.scope}")
    dims = b.kernel.data["kernel"].cluster_dims or (1, 1, 1)
    emit(ir.AtomicTile, "add", src_region, dst_region, "relaxed", bool(use_tma),
         dims[0] * dims[1] * dims[2])


def atomic_add(dst, value, memory_order=None, return_prev=False, use_tma=False, **kwargs):
    """Atomic `dst += value` on one element (once per executing thread) or, element-wise, on
    a tile. `use_tma=True` with a shared tile added into a global region: on sm_90a one thread
    hands the whole tile to the TMA unit (cp.reduce.async.bulk.tensor .add) when the shapes
    allow it, else the element-wise atomics."""
    return _atomic("add", dst, value, memory_order, return_prev, use_tma)


def atomic_max(dst, value, memory_order=None, return_prev=False, **kwargs):
    """Atomic `dst = max(dst, value)` on one element or, element-wise, on a tile."""
    return _atomic("max", dst, value, memory_order, return_prev)


def atomic_min(dst, value, memory_order=None, return_prev=False, **kwargs):
    """Atomic `dst = min(dst, value)` on one element or, element-wise, on a tile."""
    return _atomic("min", dst, value, memory_order, return_prev)


def _lanes_start(x, lanes, name, role):
    """The first element of `lanes` consecutive ones: an element, a region of `lanes` elements
    along its last dimension (`Dst[0:2]`), or a T.Ramp vector of unit stride."""
    from .vectors import Vector

    e = _element(x)
    if e is not None:
        return e
    if isinstance(x, Vector) and all(isinstance(l, ir.Load) for l in x.lanes):
        if len(x) != lanes:
            raise error(ValueError, f"T.{name} {role} has {len(x)} lanes, not {lanes}")
        return x.lanes[0]
    if isinstance(x, ir.BufferRegion):
        extents = [ext for _, ext in x.region]
        if all(ext == 1 for ext in extents[:-1]) and extents[-1] == lanes:
            return ir.Load(x.buffer, tuple(ir.as_expr(s) for s, _ in x.region), x.buffer.dtype)
        raise error(ValueError, f"T.{name} {role} {x.buffer.name} must be {lanes} consecutive "
                                f"elements of its last dimension, got extents {extents}")
    return None


def _atomic_vec(name, lanes, dst, value, return_prev=False):
    from .vectors import Vector

    b = current_builder(what=f"T.{name}")
    d = _lanes_start(dst, lanes, name, "destination")
    if d is None:
        raise error(TypeError, f"T.{name} needs an element destination such as B[i, j] (or "
                               f"B[i, j:j + {lanes}])")
    _check_atomic_dtype(name, d)
    v = _lanes_start(value, lanes, name, "value") if not isinstance(value, (int, float)) \
        else None
    if return_prev:
        # the old values lane by lane: one returning atomic add per element
        out = []
        for k in range(lanes):
            dk = ir.Load(d.buffer, d.indices[:-1] + (ir.binary("add", d.indices[-1], k),),
                         d.dtype)
            vk = ir.as_expr(value) if v is None else ir.Load(
                v.buffer, v.indices[:-1] + (ir.binary("add", v.indices[-1], k),), v.dtype)
            c = ir.Call("atomic_add", (dk, ir.cast_to(vk, d.dtype)), d.dtype,
                        (("memory_order", "relaxed"),))
            out.append(b.let("prev", c))
        return Vector(out)
    args = (d, v if v is not None else ir.as_expr(value))
    c = ir.Call(name, args, d.dtype, (("lanes", lanes),))
    emit(ir.Evaluate, c)


def atomic_addx2(dst, value, return_prev=False):
    """Atomic add of 2 consecutive elements in one instruction (fp16/bf16 pairs; float32 pairs
    on sm_90); `dst`/`value` an element, a 2-element region or a T.Ramp. `return_prev=True`
    returns the old values as a 2-lane vector (store it into a 2-element region), read by
    one atomic add per element."""
    return _atomic_vec("atomic_addx2", 2, dst, value, return_prev)


def atomic_addx4(dst, value, return_prev=False):
    """Atomic add of 4 consecutive elements at once (float32 on sm_90); as T.atomic_addx2
    with 4 lanes."""
    return _atomic_vec("atomic_addx4", 4, dst, value, return_prev)


def atomic_or(dst, value, memory_order=None, return_prev=False):
    """Atomic `dst |= value` on one 32- or 64-bit integer element (once per executing thread);
    `return_prev=True` returns the old value."""
    if _element(dst) is None:
        raise error(NotImplementedError, "T.atomic_or takes one element (such as A[i]), not a "
                                         "tile")
    return _atomic("or", dst, value, memory_order, return_prev)


def atomic_load(src, memory_order="seq_cst"):
    """Read one global element atomically with the given memory order (relaxed, consume,
    acquire or seq_cst)."""
    memory_order = _memory_order("atomic_load", memory_order, _LOAD_ORDERS)
    e = _element(src)
    if e is None:
        raise error(TypeError, "T.atomic_load needs an element such as B[i]")
    _check_atomic_dtype("atomic_load", e)
    return ir.Call("atomic_load", (e,), e.dtype, (("memory_order", memory_order),))


def atomic_store(dst, value, memory_order="seq_cst"):
    """Write one global element atomically with the given memory order (relaxed, release or
    seq_cst)."""
    memory_order = _memory_order("atomic_store", memory_order, _STORE_ORDERS)
    e = _element(dst)
    if e is None:
        raise error(TypeError, "T.atomic_store needs an element such as B[i]")
    _check_atomic_dtype("atomic_store", e)
    emit(ir.Evaluate, ir.Call("atomic_store", (e, ir.cast_to(value, e.dtype)), e.dtype,
                              (("memory_order", memory_order),)))


_ = current_loc
