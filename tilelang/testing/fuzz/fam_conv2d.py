"""Family "conv2d": a 2-D NHWC convolution written with `T.c2d_im2col` inside a pipelined GEMM,
the shape `transform/warp_specialize/tma_im2col.py` turns into one TMA load in im2col mode on sm_90a (when C is
a multiple of block_K and the tile rows are one swizzle atom) and the cp.async gather takes
everywhere else.

    A[m, k] = X[n, oh * s + kh * d - p, ow * s + kw * d - p, c]   (0 outside X, past M or K)
    Y = A @ W                                                      (Y: M x F, float32)

with m = (n, oh, ow) over N x OH x OW and k = (kh, kw, c) over KH x KH x C, channels fastest.
Square filters 1..5, stride 1..2, dilation 1..2, padding 0..2, ragged M and F, channel counts
both multiples of block_K and not, tiles 64/128 x 32..128 x 16..64, stages 1..3.
"""

from __future__ import annotations

import numpy as np

from .case import (EPS, Case, Param, default_inputs, kernel_source, pick,
                   pipelined_gemm_head)


def sample(rng, seed: int) -> Case:
    bk = int(pick(rng, (16, 32, 64, 64)))
    C = int(pick(rng, (bk, bk, 2 * bk, 24, 8)))
    KH = int(pick(rng, (1, 3, 3, 5)))
    dil = int(pick(rng, (1, 1, 2)))
    pad = int(pick(rng, (0, 1, 2)))
    reach = dil * (KH - 1) + 1
    H = int(rng.integers(max(1, reach - 2 * pad), 14))
    W = int(rng.integers(max(1, reach - 2 * pad), 14))
    s = dict(dt=pick(rng, ("float16", "float16", "bfloat16")), N=int(rng.integers(1, 4)),
             H=H, W=W, C=C, KH=KH, stride=int(pick(rng, (1, 1, 2))), dil=dil, pad=pad,
             # 16-byte filter rows (F % 8) let TMA load the filter, the condition for the
             # warp-specialised pipeline that takes the im2col tile by TMA too
             F=int(rng.integers(1, 18)) * 8 if rng.random() < 0.7 else int(rng.integers(1, 140)),
             bm=int(pick(rng, (64, 128))),
             bn=int(pick(rng, (32, 64, 128))), bk=bk, threads=int(pick(rng, (128, 256))),
             stages=int(pick(rng, (1, 2, 3, 3))))
    s["OH"] = (H + 2 * pad - reach) // s["stride"] + 1
    s["OW"] = (W + 2 * pad - reach) // s["stride"] + 1
    return build(s, seed)


def build(s: dict, seed: int) -> Case:
    dt, N, H, W, C, KH, F = (s[k] for k in ("dt", "N", "H", "W", "C", "KH", "F"))
    bm, bn, bk = s["bm"], s["bn"], s["bk"]
    M, K = N * s["OH"] * s["OW"], KH * KH * C
    params = [Param("X", (N, H, W, C), dt), Param("Wt", (K, F), dt),
              Param("Y", (M, F), "float32", "out")]
    i1, i2 = ("    " * n for n in range(1, 3))
    k = pipelined_gemm_head(s, M, F, K) + [
        i2 + f"T.c2d_im2col(X, A_s, by, ko, {KH}, {s['stride']}, {s['dil']}, {s['pad']})",
        i2 + f"T.copy(Wt[ko * {bk}, bx * {bn}], W_s)",
        i2 + "T.gemm(A_s, W_s, acc)",
        i1 + f"T.copy(acc, Y[by * {bm}, bx * {bn}])"]
    feats = ("conv2d", "gemm", "pipelined") + (("channels_per_tile",) if C % bk == 0 else ())
    return Case("conv2d", seed, kernel_source(params, k), params,
                default_inputs(params), lambda arrs: _oracle(s, arrs),
                spec=s, features=feats)


def _im2col(s, X):
    N, H, W, C, KH, st, d, p = (s[k] for k in ("N", "H", "W", "C", "KH", "stride", "dil", "pad"))
    OH, OW = s["OH"], s["OW"]
    A = np.zeros((N * OH * OW, KH * KH * C))
    for n in range(N):
        for oh in range(OH):
            for ow in range(OW):
                m = (n * OH + oh) * OW + ow
                for kh in range(KH):
                    for kw in range(KH):
                        ih, iw = oh * st + kh * d - p, ow * st + kw * d - p
                        if 0 <= ih < H and 0 <= iw < W:
                            A[m, (kh * KH + kw) * C:(kh * KH + kw + 1) * C] = X[n, ih, iw]
    return A


def _oracle(s, arrs):
    A = _im2col(s, np.asarray(arrs["X"], np.float64))
    Wt = np.asarray(arrs["Wt"], np.float64)
    K = s["KH"] * s["KH"] * s["C"]
    tol = 2 * ((K / 8 + 2) * EPS["float32"] * (np.abs(A) @ np.abs(Wt))) + 1e-30
    return {"Y": (A @ Wt, tol)}
