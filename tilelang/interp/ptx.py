"""The CPU interpreter's warp-level tensor-core instructions: `ptx_ldmatrix` and `ptx_mma`
(tilelang/language/ptx.py defines their meaning).

Both run at block level in the thread space, once per warp of 32 consecutive threads, and
need every thread of the block active (the instructions are `.sync.aligned`: a partial warp is
an error on the GPU too). Values move unchanged (same dtype on both sides); mma computes
A @ B exactly in float32 (int64 for integers, TF32-rounded inputs for tf32) and adds C, as the
interpreter's T.gemm does.
"""

from __future__ import annotations

import functools

import numpy as np

from ..ir import nodes as ir
from ..ir.dtype import DType
from .lanes import fail
from .memory import LocalStore, load_array
from .numerics import convert, tf32

__all__ = ["PTX_CALLS"]

_F32, _I64 = DType("float32"), DType("int64")


def _warp_context(ctx, what):
    if ctx.space is not ctx.thread_space:
        raise fail(ctx, NotImplementedError, f"T.{what} inside T.Parallel is not supported "
                                             "(a warp-collective instruction of the threads)")
    n = ctx.nthreads
    if n % 32:
        raise fail(ctx, ValueError, f"T.{what} needs whole warps: the block has {n} threads")
    if ctx.mask is not None:
        raise fail(ctx, ValueError, f"T.{what} is warp-collective: every thread of the block "
                                    "must execute it (it is under a thread-dependent branch)")
    return n


def _lanes(v, n):
    return np.broadcast_to(np.asarray(v, dtype=np.int64), (n,))


def _local(ctx, buf, what):
    st = ctx.bufs.get(buf)
    if not isinstance(st, LocalStore):
        raise fail(ctx, TypeError, f"T.{what}: {buf.name} is not a per-thread array here")
    return st


def _ldmatrix(c, e: ir.Call):
    trans, num = bool(e.args[0].value), int(e.args[1].value)
    src, dst = e.args[2], e.args[3]
    fsrc = [c.expr(i) for i in src.indices]
    fdst = c.expr(dst.indices[0])
    elem_bytes = src.buffer.dtype.bits // 8
    per_reg, row_len = 4 // elem_bytes, 16 // elem_bytes
    lane = np.arange(32)
    g, q = lane // 4, lane % 4

    def f(ctx):
        n = _warp_context(ctx, "ptx_ldmatrix")
        arr = ctx.bufs[src.buffer]
        # lanes 8*num .. 31 of each warp give no row (their addresses are not read)
        used = np.arange(n) % 32 < 8 * num
        idx = [_lanes(fi(ctx), n)[used] for fi in fsrc]
        cols = idx[-1][:, None] + np.arange(row_len)[None, :]  # each lane's 16-byte row
        full = tuple(np.broadcast_to(i[:, None], cols.shape) for i in idx[:-1]) + (cols,)
        got = np.asarray(load_array(ctx, arr, src.buffer, full, False, 0))
        rows = np.zeros((n, row_len), dtype=got.dtype)
        rows[used] = got
        warps = rows.reshape(n // 32, 32, row_len)
        out = np.empty((n // 32, 32, num * per_reg), dtype=rows.dtype)
        for m in range(num):
            mat = warps[:, 8 * m:8 * m + 8, :]  # rows given by lanes 8m .. 8m+7
            for k in range(per_reg):
                out[:, :, m * per_reg + k] = mat[:, 2 * q + k, g] if trans else \
                    mat[:, g, q * per_reg + k]
        out = out.reshape(n, num * per_reg)
        st = _local(ctx, dst.buffer, "ptx_ldmatrix")
        off = _lanes(fdst(ctx), n)
        for k in range(num * per_reg):
            st.store(ctx, (off + k,), out[:, k], None)
        return None
    return f


@functools.lru_cache(maxsize=None)
def _atom_tables(k: int, elem_bits: int):
    """(A coords (32, E, 2), B coords (32, E, 2) as (k, n), C coords (32, 4, 2))."""
    from ..layout.mma import mma_a_fragment, mma_accumulator, mma_b_fragment

    return (mma_a_fragment(16, k, 1, 1, elem_bits).coord_table(),
            mma_b_fragment(k, 8, 1, 1, elem_bits).coord_table(),
            mma_accumulator(16, 8, 1, 1).coord_table())


def _gather(ctx, buf, foff, count, n, what):
    st = _local(ctx, buf, what)
    off = _lanes(foff(ctx), n)
    return np.stack([np.broadcast_to(np.asarray(st.load(ctx, (off + v,))), (n,))
                     for v in range(count)], axis=1)  # (n, count)


def _scatter(table, values, shape, n):
    """Per-warp matrices from per-lane register values: table (32, E, 2) of coordinates."""
    warps = n // 32
    vals = values.reshape(warps, 32, table.shape[1])
    out = np.zeros((warps,) + shape, dtype=values.dtype)
    out[:, table[..., 0], table[..., 1]] = vals
    return out


def _mma(c, e: ir.Call):
    from ..language.ptx import MMA_KINDS

    shape, a_t, c_t, A, B, C = e.args
    (elem,), acc, k = MMA_KINDS[(shape, a_t, c_t)]
    edt, cdt = DType(elem), DType(acc)
    ta, tb, tc = _atom_tables(k, 32 if a_t == "tf32" else edt.bits)
    kind = _I64 if edt.is_int else _F32
    fa, fb, fc = (c.expr(x.indices[0]) for x in (A, B, C))

    def f(ctx):
        n = _warp_context(ctx, "ptx_mma")
        a = _scatter(ta, _gather(ctx, A.buffer, fa, ta.shape[1], n, "ptx_mma"), (16, k), n)
        b = _scatter(tb, _gather(ctx, B.buffer, fb, tb.shape[1], n, "ptx_mma"), (k, 8), n)
        acc_vals = _gather(ctx, C.buffer, fc, 4, n, "ptx_mma")
        cm = _scatter(tc, acc_vals, (16, 8), n)
        a, b = convert(a, edt, kind), convert(b, edt, kind)
        if a_t == "tf32":
            a, b = tf32(a), tf32(b)
        d = convert(cm, cdt, kind) + a @ b
        d = convert(d, kind, cdt)
        warps = n // 32
        regs = d[np.arange(warps)[:, None, None], tc[None, ..., 0], tc[None, ..., 1]]
        regs = regs.reshape(n, 4)
        st = _local(ctx, C.buffer, "ptx_mma")
        off = _lanes(fc(ctx), n)
        for v in range(4):
            st.store(ctx, (off + v,), regs[:, v], None)
        return None
    return f


PTX_CALLS = {"ptx_ldmatrix": _ldmatrix, "ptx_mma": _mma}
