"""`T.copy_cluster(src, dst, dst_block=r[, remote_barrier=bar])`: a shared tile of this block
copied into the shared tile `dst` of block `r` of the same thread-block cluster (distributed
shared memory, sm_90).

The region is cut into runs of elements that are contiguous in both buffers: one run when
both regions are contiguous, else one per row of the innermost dimension. With
`remote_barrier` (an mbarrier of `T.alloc_cluster_barrier`, the same one in every block) and
runs of whole 16-byte units, one thread of the block issues a bulk copy per run
(`cp.async.bulk.shared::cluster`, the TMA engine), after a single arrival on the peer's barrier
that announces all the bytes: the peer's wait on that barrier returns once they have landed.
Otherwise every thread stores its share through the peer's mapped address; with
`remote_barrier`, the block then synchronises and one thread arrives on the peer's barrier
(release at cluster scope), so the peer's wait again orders the data. Without it the user
orders the stores (`T.cluster_sync()`). Either way the copy counts as one arrival on the
peer's barrier.

The interpreter copies at once into the peer block's tile (a cluster's blocks run side by
side there) and counts the bytes and the arrival on its barrier.
"""

from __future__ import annotations

import sys

from ..frontend.builder import current_builder, emit, error
from ..ir import nodes as ir
from ..ir.dtype import DType

SHARED = ("shared", "shared.dyn")


def copy_to_peer(src_r, dst_r, dst_block, remote_barrier):
    """Emit the copy of shared region `src_r` into `dst_r` of cluster block `dst_block`."""
    from .misc import barrier_load, sync_threads

    b = current_builder(what="T.copy_cluster")
    kernel = b.kernel.data["kernel"]
    dims = kernel.cluster_dims or (1, 1, 1)
    if dims == (1, 1, 1):
        raise error(ValueError, "T.copy_cluster(..., dst_block=...) copies into a peer block "
                                "of a cluster: use it inside `with T.ClusterKernel(..., "
                                "cluster_dims=...)`")
    for r, role in ((src_r, "source"), (dst_r, "destination")):
        if r.buffer.scope not in SHARED:
            raise error(ValueError, f"T.copy_cluster(..., dst_block=...) copies shared memory "
                                    f"into a peer's shared memory; the {role} "
                                    f"{r.buffer.name} is {r.buffer.scope}")
    if src_r.buffer.dtype is not dst_r.buffer.dtype:
        raise error(TypeError, f"T.copy_cluster(..., dst_block=...) does not convert: "
                               f"{src_r.buffer.name} is {src_r.buffer.dtype}, "
                               f"{dst_r.buffer.name} is {dst_r.buffer.dtype}")
    rank = ir.as_expr(dst_block)
    if not rank.dtype.is_int:
        raise error(TypeError, f"T.copy_cluster: dst_block must be an integer (a block rank in "
                               f"the cluster), got {rank.dtype}")
    size = dims[0] * dims[1] * dims[2]
    if isinstance(rank, ir.Const) and not 0 <= rank.value < size:
        raise error(ValueError, f"T.copy_cluster: dst_block {rank.value} is not a block of the "
                                f"cluster of {size}")
    rank = ir.cast_to(rank, "uint32")
    bar = None if remote_barrier is None else \
        ir.Call("address_of", (barrier_load(remote_barrier, "T.copy_cluster(remote_barrier=)"),),
                DType("handle"))
    loops, src_at, dst_at, run = _runs(src_r, dst_r)
    esize = src_r.buffer.dtype.bytes
    run_bytes = run * esize
    nruns = 1
    for _, extent in loops:
        nruns *= extent

    def each_run(make):  # the statement for every run, in serial loops over the rows
        body = make(ir.address_of(src_r.buffer, src_at), ir.address_of(dst_r.buffer, dst_at))
        for var, extent in reversed(loops):
            body = ir.For(var, ir.const(0), ir.const(extent), "serial", body)
        return body

    def call(name, *args):
        return ir.Evaluate(ir.Call("call_extern", (name,) + args, DType("void")))

    leader = ir.compare("eq", _flat_thread(kernel), 0)
    if bar is not None and run_bytes % 16 == 0 and _aligned(src_r, dst_r, loops, esize):
        # the source tile's writers (every thread) ordered before the TMA engine reads it
        emit(ir.Evaluate, ir.Call("call_extern", ("tl::fence_proxy_async",), DType("void")))
        sync_threads()
        issue = ir.Seq((call("tl::mbarrier_arrive_expect_tx_remote", bar, rank,
                             ir.const(run_bytes * nruns, "uint32")),
                        each_run(lambda s, d: call("tl::tma_store_cluster", d, s, rank,
                                                   ir.const(run_bytes, "uint32"), bar))))
        emit(ir.If, leader, issue, None)
        return
    if bar is not None:
        what = "size" if not loops else "row size"
        print(f"tilelang: T.copy_cluster of {src_r.buffer.name} into {dst_r.buffer.name}: "
              f"Cluster bulk copy {what} {run_bytes} bytes is not a multiple of 16 bytes "
              "(cp.async.bulk moves 16-byte units, 16-byte aligned); the threads copy the "
              "elements instead", file=sys.stderr)
    b.emit(each_run(lambda s, d: call(f"tl::copy_to_peer<{run}>", ir.Call(
        "call_extern", ("tl::map_shared_rank", d, rank), DType("handle")), s)))
    if bar is not None:
        sync_threads()
        emit(ir.If, leader, call("tl::mbarrier_arrive_remote", bar, rank), None)


def _flat_thread(kernel):
    """The thread's index in its block, x fastest."""
    tv = kernel.thread_vars
    ext = kernel.threads
    flat = tv[-1]
    for k in range(len(tv) - 2, -1, -1):
        flat = ir.binary("add", ir.binary("mul", flat, ext[k]), tv[k])
    return flat


def _runs(src_r, dst_r):
    """(serial loops [(var, extent)], src start indices, dst start indices, run length): the
    region as runs contiguous in both buffers (static extents only)."""
    s_ext = [ir.int_value(e) for e in src_r.extents]
    d_ext = [ir.int_value(e) for e in dst_r.extents]
    if any(e is None for e in s_ext + d_ext):
        raise error(NotImplementedError, "T.copy_cluster(..., dst_block=...) of a region with "
                                         "symbolic extents is not supported")
    total = 1
    for e in s_ext:
        total *= e
    s_starts = [ir.as_expr(s) for s, _ in src_r.region]
    d_starts = [ir.as_expr(s) for s, _ in dst_r.region]
    if _contiguous(src_r, s_ext) and _contiguous(dst_r, d_ext):
        return [], s_starts, d_starts, total
    # rows of the innermost dimension, when it is the innermost non-unit extent of both
    s_nu = [k for k, e in enumerate(s_ext) if e != 1]
    d_nu = [k for k, e in enumerate(d_ext) if e != 1]
    inner_ok = s_nu and s_nu[-1] == len(s_ext) - 1 and d_nu[-1] == len(d_ext) - 1
    run = s_ext[-1] if inner_ok else 1
    outer_s, outer_d = (s_nu[:-1], d_nu[:-1]) if inner_ok else (s_nu, d_nu)
    loops = []
    for ks, kd in zip(outer_s, outer_d):
        var = ir.Var(f"row{len(loops)}")
        loops.append((var, s_ext[ks]))
        s_starts[ks] = ir.binary("add", s_starts[ks], var)
        d_starts[kd] = ir.binary("add", d_starts[kd], var)
    return loops, s_starts, d_starts, run


def _contiguous(r, extents):
    """The region is one contiguous run of its (row-major, unswizzled) buffer: every dimension
    after the outermost non-unit one is covered whole."""
    nu = [k for k, e in enumerate(extents) if e != 1]
    if not nu:
        return True
    for k in range(nu[0] + 1, len(extents)):
        start = ir.int_value(ir.as_expr(r.region[k][0]))
        if start != 0 or extents[k] != ir.int_value(ir.as_expr(r.buffer.shape[k])):
            return False
    return True


def _aligned(src_r, dst_r, loops, esize):
    """Every run starts 16-byte aligned in both buffers (compile-time starts)."""
    for r in (src_r, dst_r):
        strides = [1] * len(r.buffer.shape)
        for k in range(len(strides) - 2, -1, -1):
            dim = ir.int_value(ir.as_expr(r.buffer.shape[k + 1]))
            if dim is None:
                return False
            strides[k] = strides[k + 1] * dim
        off = 0
        for (start, _), st in zip(r.region, strides):
            s = ir.int_value(ir.as_expr(start))
            if s is None:
                return False
            off += s * st
        if off * esize % 16:
            return False
        # the rows' starts: the row stride of every looped dimension
        nu = [k for k, e in enumerate(r.extents) if ir.int_value(e) != 1]
        for k in nu[:len(loops)]:
            if strides[k] * esize % 16:
                return False
    return True
