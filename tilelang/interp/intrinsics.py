"""Intrinsic calls (`ir.Call`) of the CPU interpreter: math functions, bit reinterpretation,
warp shuffles, scalar atomics and the no-op synchronisation calls.

`compile_call(compiler, call, want_value)` returns the closure of one call; an unknown op is
an error naming it (raised when the kernel is compiled, not when it runs). Math is computed
in the call's dtype (float16 stays float16; bfloat16/float8 are computed in float32 and
rounded). Shuffles exchange values across the thread axis within warps of 32 lanes, with the
CUDA `__shfl_*_sync` rules for `width` segments.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import nodes as ir
from ..ir.dtype import DType
from .ieee import IEEE_OPS, compile_ieee
from .packed_x2 import compile_packed_store, is_packed_x2
from .peer_copy import PEER_COPY_CALLS, compile_peer_copy, is_peer_copy
from .lanes import fail
from .memory import LocalStore, atomic_rmw, store_array
from .ptx import PTX_CALLS
from .wide_access import WIDE_ACCESS, compile_wide_access
from .numerics import NARROW_FLOATS, const_value, convert, reinterpret_bits, round_to

__all__ = ["compile_call", "MATH_UNARY", "is_modeled_extern"]

_erf = np.frompyfunc(math.erf, 1, 1)


def _round_half_away(x):
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t).astype(np.asarray(x).dtype)


def _exp10(x):
    return np.power(np.asarray(x).dtype.type(10), x)


def _sigmoid(x):
    one = np.asarray(x).dtype.type(1)
    return one / (one + np.exp(-x))


def _rsqrt(x):
    return np.asarray(x).dtype.type(1) / np.sqrt(x)


def _rcp(x):
    return np.asarray(x).dtype.type(1) / x


def _erf_np(x):
    a = np.asarray(x)
    return _erf(a.astype(np.float64)).astype(a.dtype)


MATH_UNARY = {
    "exp": np.exp, "exp2": np.exp2, "exp10": _exp10, "log": np.log, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "expm1": np.expm1, "tanh": np.tanh, "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "erf": _erf_np, "sigmoid": _sigmoid, "rsqrt": _rsqrt,
    "floor": np.floor, "ceil": np.ceil, "round": _round_half_away, "trunc": np.trunc,
    "nearbyint": np.rint, "rcp": _rcp, "fast_exp": np.exp, "fast_rcp": _rcp,
    # fast-math intrinsics (approximate on the GPU): computed accurately here
    "__exp": np.exp, "__exp10": _exp10, "__log": np.log, "__log2": np.log2,
    "__log10": np.log10, "__sin": np.sin, "__cos": np.cos, "__tan": np.tan,
}
_MATH_BINARY = {"pow": np.power, "fmod": np.fmod, "atan2": np.arctan2}
_PREDICATES = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}
_NO_OPS = frozenset({"sync_threads", "named_barrier_arrive", "sync_warp", "comment",
                     "set_max_nreg", "wait_wgmma", "fence_proxy_async", "barrier_arrive",
                     "barrier_wait", "no_set_max_nreg",
                     # the interpreter runs a program's kernels one after the other, which
                     # is what a programmatic dependent launch waits for
                     "pdl_trigger", "pdl_sync"})
_ATOMICS = {"atomic_add": "add", "atomic_max": "max", "atomic_min": "min", "atomic_or": "or",
            "atomic_and": "and", "atomic_xor": "xor"}


def _scalar(v):
    if type(v) is np.ndarray and v.ndim == 0:
        return v[()]
    return v


def compile_call(c, e: ir.Call, want_value: bool = True):
    op = e.op
    if op in MATH_UNARY:
        return _math_unary(c, e)
    if op in IEEE_OPS:
        return compile_ieee(c, e)
    if op in _MATH_BINARY:
        fa, fb = c.as_type(e.args[0], e.dtype), c.as_type(e.args[1], e.dtype)
        fn = _MATH_BINARY[op]
        return _rounded(lambda ctx: fn(fa(ctx), fb(ctx)), e.dtype)
    if op in _PREDICATES:
        fa = c.expr(e.args[0])
        fn = _PREDICATES[op]
        return lambda ctx: fn(fa(ctx))
    if op == "sqrt":
        return _sqrt(c, e)
    if op == "abs":
        fa = c.as_type(e.args[0], e.dtype)
        return lambda ctx: np.abs(fa(ctx))
    if op == "reinterpret":
        fa = c.expr(e.args[0])
        src, dst = e.args[0].dtype, e.dtype
        return lambda ctx: reinterpret_bits(fa(ctx), src, dst)
    if op in ("shfl_xor", "shfl_down", "shfl_up", "shfl_sync"):
        return _shuffle(c, e)
    if op in _WARP_REDUCE:
        return _warp_reduce(c, e)
    if op in ("popcount", "clz"):
        return _bit_count(c, e)
    if op in _VOTES:
        return _vote(c, e)
    if op in ("match_any_sync", "match_all_sync"):
        return _match(c, e)
    if op in ("ffs", "fns"):
        return _bit_search(c, e)
    if op in _ATOMICS:
        return _atomic(c, e, _ATOMICS[op], want_value)
    if op in ("atomic_addx2", "atomic_addx4"):
        return _atomic_vec(c, e)
    if op in ("atomic_load", "ldg"):  # ldg: a load through the read-only cache
        return c.expr(e.args[0])
    if op == "atomic_store":
        return _atomic_store(c, e)
    if op in PTX_CALLS:
        return PTX_CALLS[op](c, e)
    if op in _NO_OPS:
        zero = np.int32(0)
        return lambda ctx: zero
    if op == "call_extern":
        name = e.args[0] if e.args and isinstance(e.args[0], str) else "?"
        if is_modeled_extern(name):
            return _library_call(c, e, name)
        raise NotImplementedError(f"the kernel contains injected CUDA (T.call_extern of "
                                  f"`{name}`) and runs only on the GPU")
    if op in ("address_of", "access_ptr"):
        raise NotImplementedError(f"`{op}` makes a device pointer for T.call_extern; pointers "
                                  "do not exist on the CPU interpreter (GPU only)")
    raise NotImplementedError(f"the CPU interpreter does not know the intrinsic `{op}` "
                              f"(in `{e}`)")


def _rounded(fn, dtype: DType):
    if dtype.name in NARROW_FLOATS:
        return lambda ctx: round_to(fn(ctx), dtype)
    return fn


def _math_unary(c, e):
    dt = e.dtype
    arg = e.args[0]
    fn = MATH_UNARY[e.op]
    if not dt.is_float:  # a frontend gives float args; be lenient with ints anyway
        f32 = DType("float32")
        fa = c.as_type(arg, f32)
        return lambda ctx: convert(fn(fa(ctx)), f32, dt)
    fa = c.as_type(arg, dt)
    return _rounded(lambda ctx: _scalar(fn(fa(ctx))), dt)


def _sqrt(c, e):
    dt = e.dtype
    if dt.is_float:
        fa = c.as_type(e.args[0], dt)
        return _rounded(lambda ctx: np.sqrt(fa(ctx)), dt)
    # integer sqrt: C computes sqrt((double)x) and converts back (truncation)
    fa = c.expr(e.args[0])
    f64 = DType("float64")
    src = e.args[0].dtype
    return lambda ctx: convert(np.sqrt(convert(fa(ctx), src, f64)), f64, dt)


# ---- warp shuffles ------------------------------------------------------------------------------

def _shuffle(c, e):
    kind = e.op[5:]
    fv = c.expr(e.args[0])
    fo = c.expr(e.args[1])
    fw = c.expr(e.args[2]) if len(e.args) > 2 else (lambda ctx: 32)

    def f(ctx):
        v = fv(ctx)
        if ctx.space is not ctx.thread_space:
            raise fail(ctx, NotImplementedError, f"T.{e.op} inside T.Parallel is not supported "
                                                 "(warp shuffles exchange per-thread values)")
        if type(v) is not np.ndarray or v.ndim == 0:
            return v  # every lane holds the same value
        off = fo(ctx)
        width = int(fw(ctx))
        if width <= 0 or width > 32 or width & (width - 1):
            raise fail(ctx, ValueError, f"T.{e.op}: width must be a power of two <= 32, got "
                                        f"{width}")
        n = ctx.nthreads
        v = np.broadcast_to(v, (n,))
        tid = np.arange(n)
        lane = tid % 32
        seg = lane - lane % width
        off = np.asarray(off).astype(np.int64)
        if kind == "xor":
            src = lane ^ off
            own = src >= seg + width
        elif kind == "down":
            src = lane + off
            own = src >= seg + width
        elif kind == "up":
            src = lane - off
            own = src < seg
        else:
            src = seg + off % width
            own = np.zeros(n, np.bool_)
        g = tid - lane + src
        own = own | (g < 0) | (g >= n)
        return v[np.where(own, tid, g)]
    return f


# ---- warp all-reductions -------------------------------------------------------------------------

# combine of each warp reduction: (for floats, for integers); max/min ignore a NaN operand
_WARP_REDUCE = {"warp_reduce_sum": (np.add, np.add), "warp_reduce_max": (np.fmax, np.maximum),
                "warp_reduce_min": (np.fmin, np.minimum),
                "warp_reduce_bitand": (None, np.bitwise_and),
                "warp_reduce_bitor": (None, np.bitwise_or)}


def _warp_reduce(c, e):
    """The xor butterfly of tl::warp_allreduce (offsets 16, 8, 4, 2, 1), so float sums round
    exactly as on the GPU; every lane of a warp ends with the result."""
    dt = e.dtype
    fv = c.as_type(e.args[0], dt)
    op = _WARP_REDUCE[e.op][0 if dt.is_float else 1]
    if op is None:
        raise NotImplementedError(f"T.{e.op} needs an integer value, got {dt}")
    narrow = dt.name in NARROW_FLOATS
    storage = dt.numpy

    def f(ctx):
        v = fv(ctx)
        if ctx.space is not ctx.thread_space:
            raise fail(ctx, NotImplementedError, f"T.{e.op} inside T.Parallel is not supported "
                                                 "(warp reductions combine per-thread values)")
        n = ctx.nthreads
        if n % 32:
            raise fail(ctx, ValueError, f"T.{e.op} needs whole warps: the block has {n} threads, "
                                        "not a multiple of 32")
        lanes = np.array(np.broadcast_to(np.asarray(v, storage), (n,))).reshape(-1, 32)
        idx = np.arange(32)
        with np.errstate(over="ignore", invalid="ignore"):
            for off in (16, 8, 4, 2, 1):
                lanes = op(lanes, lanes[:, idx ^ off]).astype(storage, copy=False)
                if narrow:
                    lanes = round_to(lanes, dt)
        return lanes.reshape(n)
    return f


# ---- warp and block votes ------------------------------------------------------------------------

_VOTES = ("any_sync", "all_sync", "ballot_sync", "activemask", "syncthreads_count",
          "syncthreads_and", "syncthreads_or")


def _vote(c, e):
    """Votes over the lanes of each warp (`mask` selects them; lanes that do not execute the
    statement take no part) or over the whole block (the syncthreads_* barriers)."""
    op = e.op
    fargs = [c.expr(a) for a in e.args]
    block = op.startswith("syncthreads_")

    def f(ctx):
        if ctx.space is not ctx.thread_space:
            raise fail(ctx, NotImplementedError, f"T.{op} inside T.Parallel (votes combine "
                                                 "per-thread values)")
        n = ctx.nthreads
        active = np.ones(n, bool) if ctx.mask is None else \
            np.array(np.broadcast_to(ctx.mask, (n,)))
        if block:
            if not active.all():
                raise fail(ctx, RuntimeError, f"T.{op} is a block barrier reached by only "
                                              "some threads (the kernel would hang on the GPU)")
            pred = np.broadcast_to(np.asarray(fargs[0](ctx)) != 0, (n,))
            r = {"count": pred.sum(), "and": pred.all(), "or": pred.any()}[op[12:]]
            return np.int32(r)
        if n % 32:
            raise fail(ctx, ValueError, f"T.{op} needs whole warps: the block has {n} threads")
        lane = np.arange(n) % 32
        if op == "activemask":
            part = active
        else:
            member = (np.broadcast_to(np.asarray(fargs[0](ctx)).astype(np.uint64), (n,))
                      >> lane.astype(np.uint64)) & np.uint64(1)
            part = active & (member != 0)
        pred = part if op == "activemask" else \
            part & (np.broadcast_to(np.asarray(fargs[1](ctx)) != 0, (n,)))
        warps = pred.reshape(-1, 32)
        if op == "any_sync":
            r = np.repeat(warps.any(1), 32).astype(np.int32)
        elif op == "all_sync":
            r = np.repeat((warps | ~part.reshape(-1, 32)).all(1), 32).astype(np.int32)
        else:
            bits = (warps.astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(1)
            r = np.repeat(bits.astype(np.uint64), 32)
        return r
    return f


def _match(c, e):
    """__match_any_sync / __match_all_sync over each warp's executing lanes in `mask`."""
    fmask, fval = c.expr(e.args[0]), c.expr(e.args[1])
    op = e.op

    def f(ctx):
        if ctx.space is not ctx.thread_space:
            raise fail(ctx, NotImplementedError, f"T.{op} inside T.Parallel")
        n = ctx.nthreads
        if n % 32:
            raise fail(ctx, ValueError, f"T.{op} needs whole warps: the block has {n} threads")
        lane = np.arange(n) % 32
        active = np.ones(n, bool) if ctx.mask is None else \
            np.array(np.broadcast_to(ctx.mask, (n,)))
        m = np.broadcast_to(np.asarray(fmask(ctx)).astype(np.uint64), (n,))
        part = active & (((m >> lane.astype(np.uint64)) & np.uint64(1)) != 0)
        v = np.broadcast_to(np.asarray(fval(ctx)), (n,)).reshape(-1, 32)
        p = part.reshape(-1, 32)
        same = (v[:, :, None] == v[:, None, :]) & p[:, None, :]  # [warp, lane, other]
        weights = np.uint64(1) << np.arange(32, dtype=np.uint64)
        if op == "match_any_sync":
            r = (same.astype(np.uint64) * weights).sum(2)
        else:
            lane_agrees = (same | ~p[:, None, :]).all(2)  # equal to every participant
            warp_agrees = (lane_agrees | ~p).all(1)
            whole = (p.astype(np.uint64) * weights).sum(1)
            r = np.repeat(np.where(warp_agrees, whole, np.uint64(0))[:, None], 32, axis=1)
        return r.reshape(n).astype(np.uint32)
    return f


def _bit_search(c, e):
    fargs = [c.expr(a) for a in e.args]
    bits = e.args[0].dtype.bits

    def ffs(ctx):
        x = np.asarray(fargs[0](ctx)).astype(np.int64).astype(np.uint64)
        if bits < 64:
            x = x & np.uint64((1 << bits) - 1)
        low = x & (~x + np.uint64(1))  # the lowest set bit alone
        pos = np.where(x == 0, 0, np.log2(np.where(low == 0, 1, low).astype(np.float64))
                       .astype(np.int64) + 1)
        return _scalar(pos.astype(np.int32))

    def fns(ctx):
        mask, base, offset = (np.asarray(f(ctx)).astype(np.int64) for f in fargs)
        mask, base, offset = np.broadcast_arrays(mask, base, offset)
        out = np.full(mask.shape, 0xFFFFFFFF, np.uint32)
        for idx in np.ndindex(mask.shape):
            m, b, k = int(mask[idx]) & 0xFFFFFFFF, int(base[idx]), int(offset[idx])
            if k == 0:
                out[idx] = b if 0 <= b < 32 and (m >> b) & 1 else 0xFFFFFFFF
                continue
            order = range(b, 32) if k > 0 else range(b, -1, -1)
            hits = [p for p in order if 0 <= p < 32 and (m >> p) & 1]
            if len(hits) >= abs(k):
                out[idx] = hits[abs(k) - 1]
        return _scalar(out)
    return ffs if e.op == "ffs" else fns


# ---- bit counting --------------------------------------------------------------------------------

def _popcount_bits(u, bits):
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        return np.bitwise_count(u)
    one = np.array(1, u.dtype)
    return sum(((u >> np.array(k, u.dtype)) & one).astype(np.int64) for k in range(bits))


def _clz_bits(u, bits):
    """Leading zeros of unsigned `u` in a `bits`-wide word: bits minus the bit length."""
    length = np.zeros(np.shape(u), np.int64)
    for k in range(bits):
        length = np.where((u >> np.array(k, u.dtype)) != 0, k + 1, length)
    return bits - length


def _bit_count(c, e):
    src = e.args[0].dtype
    fa = c.expr(e.args[0])
    udt = np.dtype(f"uint{src.bits}")
    out = e.dtype.numpy
    bits = src.bits
    is_pop = e.op == "popcount"

    def f(ctx):
        v = np.asarray(fa(ctx), src.numpy)
        u = np.ascontiguousarray(v).view(udt)
        r = _popcount_bits(u, bits) if is_pop else _clz_bits(u, bits)
        return _scalar(np.asarray(r).astype(out))
    return f


# ---- atomics -------------------------------------------------------------------------------------

def _element(c, load, what):
    if not isinstance(load, ir.Load):
        raise NotImplementedError(f"{what} needs a buffer element destination, got {load}")
    return load.buffer, [c.expr(i) for i in load.indices]


def _store_of(ctx, buf):
    try:
        return ctx.bufs[buf]
    except KeyError:
        raise fail(ctx, NameError, f"buffer {buf.name} is not allocated here") from None


def _atomic(c, e, op, want_value):
    buf, fidx = _element(c, e.args[0], f"T.{e.op}")
    fval = c.as_type(e.args[1], buf.dtype)
    is_global = buf.scope == "global"
    narrow = buf.dtype.name in NARROW_FLOATS
    dt = buf.dtype
    conv = (lambda x: round_to(x, dt)) if narrow else None

    def f(ctx):
        st = _store_of(ctx, buf)
        idx = tuple([fi(ctx) for fi in fidx])
        val = fval(ctx)
        prev = atomic_rmw(ctx, st, buf, idx, val, op, is_global, want_value, conv)
        return prev if want_value else None
    return f


def _atomic_vec(c, e):
    lanes = dict(e.attrs).get("lanes", 2 if e.op.endswith("x2") else 4)
    buf, fidx = _element(c, e.args[0], f"T.{e.op}")
    src = e.args[1]
    dt = buf.dtype
    conv = (lambda x: round_to(x, dt)) if dt.name in NARROW_FLOATS else None
    is_global = buf.scope == "global"
    if isinstance(src, ir.Load):
        sbuf = src.buffer
        reads = []
        for k in range(lanes):
            shifted = list(src.indices[:-1]) + [ir.binary("add", src.indices[-1], k)]
            reads.append(c.as_type(ir.Load(sbuf, tuple(shifted), sbuf.dtype), dt))
    else:
        one = c.as_type(src, dt)
        reads = [one] * lanes

    def f(ctx):
        st = _store_of(ctx, buf)
        idx = [fi(ctx) for fi in fidx]
        for k in range(lanes):
            kidx = tuple(idx[:-1]) + (idx[-1] + k,)
            atomic_rmw(ctx, st, buf, kidx, reads[k](ctx), "add", is_global, False, conv)
        return None
    return f


def _atomic_store(c, e):
    buf, fidx = _element(c, e.args[0], "T.atomic_store")
    fval = c.as_type(e.args[1], buf.dtype)
    is_global = buf.scope == "global"
    zero = const_value(0, buf.dtype)

    def f(ctx):
        st = _store_of(ctx, buf)
        idx = tuple([fi(ctx) for fi in fidx])
        val = fval(ctx)
        if isinstance(st, LocalStore):
            st.store(ctx, idx, val, ctx.mask)
        else:
            store_array(ctx, st, buf, idx, val, ctx.mask, is_global)
        return zero
    return f


# ---- header-library calls the T namespace emits (mbarriers, TMA bookkeeping, fences) ----------

_MBARRIER_CALLS = ("tl::mbarrier_arrive", "tl::mbarrier_wait", "tl::mbarrier_expect_tx",
                   "tl::mbarrier_arrive_expect_tx", "tl::mbarrier_cp_async_arrive_noinc")
# asynchronous-proxy ordering and waits for asynchronous work: TMA stores, cp.async and wgmma
# are complete when the interpreter issues them
_ORDERING_CALLS = ("tl::fence_proxy_async", "tl::tma_store_arrive", "tl::cp_async_commit")
_ORDERING_PREFIXES = ("tl::tma_store_wait<", "tl::tma_store_wait_complete<", "tl::wgmma_wait<",
                      "tl::cp_async_wait<")
_CP_ASYNC = ("tl::cp_async<", "tl::cp_async_zfill<")
# CUDA functions a kernel may call by name that change nothing the interpreter models (a
# sleep; fences, which its one-at-a-time execution already honours)
_CUDA_NO_EFFECT = ("__nanosleep", "__threadfence", "__threadfence_block",
                   "__threadfence_system")


_GRID_SYNC = ir.GRID_SYNC
# the cluster barrier (arrive, wait or both) and the block's rank in its cluster
CLUSTER_BARRIER_CALLS = {"tl::cluster_arrive": (True, False),
                         "tl::cluster_arrive_relaxed": (True, False),
                         "tl::cluster_wait": (False, True), "tl::cluster_sync": (True, True)}
_CLUSTER_RANK = "tl::cluster_ctarank"
_REMOTE_ARRIVE = "tl::mbarrier_arrive_remote"
# calls after which a block may depend on its cluster's peers (they run side by side)
CLUSTER_SYNC_CALLS = tuple(CLUSTER_BARRIER_CALLS) + (_REMOTE_ARRIVE,) + PEER_COPY_CALLS


def is_modeled_extern(name: str) -> bool:
    """Whether the interpreter executes this `tl::` header call (emitted by T.barrier_arrive,
    T.mbarrier_wait_parity, T.ptx_cp_async, T.fence_proxy_async, ...) rather than rejecting
    the kernel."""
    return name in _MBARRIER_CALLS or name in _ORDERING_CALLS or name == _GRID_SYNC or \
        name in _CUDA_NO_EFFECT or name.startswith(_ORDERING_PREFIXES + _CP_ASYNC) or \
        bool(WIDE_ACCESS.match(name)) or \
        name in CLUSTER_BARRIER_CALLS or name in (_CLUSTER_RANK, _REMOTE_ARRIVE) or \
        is_peer_copy(name) or is_packed_x2(name)


def _cluster_barrier(name):
    arrive, wait = CLUSTER_BARRIER_CALLS[name]
    what = "T." + name[4:]

    def f(ctx):
        if ctx.space is not ctx.thread_space:
            raise fail(ctx, NotImplementedError, f"{what} inside T.Parallel")
        barrier = ctx.cluster_barrier
        if barrier is None:  # not a cluster kernel: a cluster of one block
            return None
        if arrive:
            barrier.arrive(ctx, what)
        if wait:
            barrier.wait(ctx, what)
        return None
    return f


def _pointee(c, ptr, what):
    """(buffer, index closures) of an `address_of(buf[idx])` argument."""
    load = ptr.args[0] if isinstance(ptr, ir.Call) and ptr.op == "address_of" else None
    if not isinstance(load, ir.Load):
        raise NotImplementedError(f"{what} of {ptr}: the interpreter follows element "
                                  "pointers (T.access_ptr(A[i, j]) / T.address_of) only")
    return load.buffer, [c.expr(i) for i in load.indices]


def _cp_async(c, e, name):
    """cp.async at once: each active thread copies its bytes (zero-filled past `src_bytes`)."""
    nbytes = int(name[name.index("<") + 1:name.index(">")])
    dbuf, fdst = _pointee(c, e.args[1], "T.ptx_cp_async")
    sbuf, fsrc = _pointee(c, e.args[2], "T.ptx_cp_async")
    fsize = c.expr(e.args[3]) if len(e.args) > 3 else None
    esize = dbuf.dtype.bits // 8
    if dbuf.dtype is not sbuf.dtype:
        raise NotImplementedError(f"cp.async from {sbuf.dtype} {sbuf.name} into {dbuf.dtype} "
                                  f"{dbuf.name} reinterprets bytes (GPU only)")
    n = nbytes // esize

    def flat(ctx, buf, fidx, arr, act):
        idx = [np.broadcast_to(np.asarray(f(ctx), np.int64), (ctx.nthreads,))[act]
               for f in fidx]
        off = np.zeros(int(np.count_nonzero(act)), np.int64)
        for i, extent in zip(idx, arr.shape):
            off = off * extent + i
        if np.any(off < 0) or np.any(off + n > arr.size):
            raise fail(ctx, IndexError, f"cp.async of {n} elements at {buf.name}"
                                        f"{[int(np.asarray(x).reshape(-1)[0]) for x in idx]} "
                                        f"leaves {buf.name} (shape {list(arr.shape)})")
        return off

    def f(ctx):
        if ctx.space is not ctx.thread_space:
            raise fail(ctx, NotImplementedError, "T.ptx_cp_async inside T.Parallel")
        darr, sarr = ctx.bufs[dbuf], ctx.bufs[sbuf]
        act = np.ones(ctx.nthreads, bool) if ctx.mask is None else \
            np.broadcast_to(ctx.mask, (ctx.nthreads,))
        d = flat(ctx, dbuf, fdst, darr, act)
        valid = np.full(d.shape, n)
        if fsize is not None:
            valid = (np.broadcast_to(np.asarray(fsize(ctx)), (ctx.nthreads,))[act]
                     // esize).astype(np.int64)
        reading = act.copy()
        reading[act] = valid > 0  # a zero-filled copy reads nothing (any source address)
        s = np.zeros(d.shape, np.int64)
        s[valid > 0] = flat(ctx, sbuf, fsrc, sarr, reading)
        dflat, sflat = darr.reshape(-1), sarr.reshape(-1)
        for k in range(n):
            vals = np.zeros(d.shape, darr.dtype)
            some = valid > k
            if np.any(some):
                vals[some] = sflat[s[some] + k]
            dflat[d + k] = vals
        return None
    return f


def _library_call(c, e, name):
    from .roles import per_lane, wait

    if name.startswith(_CP_ASYNC):
        return _cp_async(c, e, name)
    if WIDE_ACCESS.match(name):
        return compile_wide_access(c, e, name)
    if name == _GRID_SYNC:
        def grid_sync(ctx):
            ctx.grid_barrier.sync(ctx)
        return grid_sync
    if name in CLUSTER_BARRIER_CALLS:
        return _cluster_barrier(name)
    if is_peer_copy(name):
        return compile_peer_copy(c, e, name)
    if is_packed_x2(name):
        return compile_packed_store(c, e, name)
    if name == _CLUSTER_RANK:
        from .tileops import cluster_rank

        return lambda ctx: np.int32(cluster_rank(ctx))
    if name not in _MBARRIER_CALLS + (_REMOTE_ARRIVE,):
        zero = np.int32(0)
        return lambda ctx: zero
    ptr = e.args[1]
    bar = ptr.args[0] if isinstance(ptr, ir.Call) and ptr.op == "address_of" else None
    if not isinstance(bar, ir.Load) or len(bar.indices) != 1:
        raise NotImplementedError(f"`{name}` of {ptr}: the interpreter models barriers of "
                                  "T.alloc_barrier only")
    buf, fidx = bar.buffer, c.expr(bar.indices[0])
    farg = c.expr(e.args[2]) if len(e.args) > 2 else None
    what = {"tl::mbarrier_wait": "T.mbarrier_wait_parity"}.get(name, "T." + name[4:])

    def f(ctx):
        if ctx.space is not ctx.thread_space:
            raise fail(ctx, NotImplementedError, f"{what} inside T.Parallel")
        mask = ctx.mask
        idx = fidx(ctx)
        bars = ctx.barriers
        if name == "tl::mbarrier_wait":
            n = ctx.nthreads
            sel = slice(None) if mask is None else np.broadcast_to(mask, (n,))
            parity = farg(ctx)
            active_idx = np.broadcast_to(idx, (n,))[sel]
            active_par = np.broadcast_to(parity, (n,))[sel]
            for i in np.unique(active_idx):
                wait(ctx, buf, int(i), active_par[active_idx == i], what)
            return None
        if name == _REMOTE_ARRIVE:  # on the same barrier of the cluster's block of that rank
            if ctx.cluster_barrier is None:
                raise fail(ctx, RuntimeError, "T.mbarrier_arrive(bar, cta_id) outside a "
                                              "T.ClusterKernel")
            n = ctx.nthreads
            ranks = np.broadcast_to(np.asarray(farg(ctx), np.int64), (n,))
            slots = np.broadcast_to(np.asarray(idx, np.int64), (n,))
            if mask is not None:
                active = np.broadcast_to(mask, (n,))
                ranks, slots = ranks[active], slots[active]
            pairs, counts = np.unique(np.stack([ranks, slots]), axis=1, return_counts=True)
            for (rank, i), lanes in zip(pairs.T.tolist(), counts.tolist()):
                ctx.cluster_barrier.peer(ctx, rank).arrive(ctx, buf, i, lanes)
            return None
        for i, lanes in per_lane(ctx, mask, idx):
            if name in ("tl::mbarrier_expect_tx", "tl::mbarrier_arrive_expect_tx"):
                bars.expect_tx(ctx, buf, i, int(farg(ctx)) * lanes)
            if name != "tl::mbarrier_expect_tx":
                bars.arrive(ctx, buf, i, lanes)
        return None
    return f
