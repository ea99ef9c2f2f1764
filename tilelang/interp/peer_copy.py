"""Copies into a cluster peer's shared memory (`T.copy_cluster(..., dst_block=r)`, lowered by
language/cluster_copy.py into the header calls below): the interpreter writes the peer block's
tile at once (a cluster's blocks run side by side, roles.run_clusters) and counts the bytes and
the arrival on the peer's barrier.

  tl::mbarrier_arrive_expect_tx_remote(&bar, rank, bytes)   (one thread)
  tl::tma_store_cluster(&dst[..], &src[..], rank, bytes, &bar)   (one thread)
  tl::copy_to_peer<N>(tl::map_shared_rank(&dst[..], rank), &src[..])   (every thread of the
      block, together)
"""

from __future__ import annotations

import numpy as np

from ..ir import nodes as ir
from .lanes import fail

ARRIVE_EXPECT = "tl::mbarrier_arrive_expect_tx_remote"
BULK = "tl::tma_store_cluster"
SIMT = "tl::copy_to_peer<"
MAP = "tl::map_shared_rank"
PEER_COPY_CALLS = (ARRIVE_EXPECT, BULK, SIMT)


def is_peer_copy(name: str) -> bool:
    return name in (ARRIVE_EXPECT, BULK, MAP) or name.startswith(SIMT)


def compile_peer_copy(c, e, name):
    args = e.args[1:]
    what = "T.copy_cluster(..., dst_block=...)"

    def element(ptr):  # address_of(buf[idx]) -> (buf, compiled indices)
        if not (isinstance(ptr, ir.Call) and ptr.op == "address_of"
                and isinstance(ptr.args[0], ir.Load)):
            raise NotImplementedError(f"`{name}` of {ptr}: the interpreter models element "
                                      "addresses of buffers only")
        load = ptr.args[0]
        return load.buffer, [c.expr(i) for i in load.indices]

    if name == ARRIVE_EXPECT:
        (bar, fbar), frank, fbytes = element(args[0]), c.expr(args[1]), c.expr(args[2])
    elif name == BULK:
        (dst, fdst), (src, fsrc), frank = element(args[0]), element(args[1]), c.expr(args[2])
        fbytes = c.expr(args[3])
        bar, fbar = element(args[4])
        count = None
    elif name == MAP:
        raise NotImplementedError("tl::map_shared_rank outside T.copy_cluster: the interpreter "
                                  "models peers' tiles in T.copy_cluster(..., dst_block=) only")
    else:
        mapped = args[0]
        if not (isinstance(mapped, ir.Call) and mapped.op == "call_extern"
                and mapped.args[0] == MAP):
            raise NotImplementedError(f"`{name}` of {mapped}: expected a tl::map_shared_rank "
                                      "address")
        (dst, fdst), frank = element(mapped.args[1]), c.expr(mapped.args[2])
        src, fsrc = element(args[1])
        count = int(name[len(SIMT):-1])

    def offset(value, buf, fidx):
        off = 0
        for fi, extent in zip(fidx, buf.shape):
            off = off * int(extent) + value(fi)
        return off

    def f(ctx):
        if ctx.space is not ctx.thread_space:
            raise fail(ctx, NotImplementedError, f"{what} inside T.Parallel")
        active = np.ones(ctx.nthreads, bool) if ctx.mask is None else \
            np.broadcast_to(ctx.mask, (ctx.nthreads,))
        if not active.any():
            return None
        lead = int(np.argmax(active))

        def value(fe):  # the operand as the (first) issuing thread has it
            return int(np.broadcast_to(np.asarray(fe(ctx), np.int64), (ctx.nthreads,))[lead])

        if ctx.cluster_barrier is None:
            raise fail(ctx, RuntimeError, f"{what} outside a T.ClusterKernel")
        other = ctx.cluster_barrier.block(ctx, value(frank))
        if name == ARRIVE_EXPECT:
            i = value(fbar[0])
            other.barriers.expect_tx(ctx, bar, i, value(fbytes))
            other.barriers.arrive(ctx, bar, i, 1)
            return None
        n = count if count is not None else value(fbytes) // src.dtype.bytes
        s_off, d_off = offset(value, src, fsrc), offset(value, dst, fdst)
        sflat = np.asarray(ctx.bufs[src]).reshape(-1)
        dflat = np.asarray(other.bufs[dst]).reshape(-1)
        if s_off + n > sflat.size or d_off + n > dflat.size:
            raise fail(ctx, IndexError, f"{what}: {n} elements at {src.name}[{s_off}] -> "
                                        f"{dst.name}[{d_off}] leave the tiles")
        dflat[d_off:d_off + n] = sflat[s_off:s_off + n]
        if name == BULK:
            other.barriers.complete_tx(ctx, bar, value(fbar[0]), value(fbytes))
        return None
    return f
