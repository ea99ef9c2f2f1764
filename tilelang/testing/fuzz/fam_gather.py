"""Family "gather": a 1-D convolution written as an im2col gather inside a pipelined GEMM,
the shape of code `transform/partition_parallel/async_gather.py` turns into zero-filling cp.async stages.

    A[m, k] = X[m * stride + k // C - pad, k % C]   (0 outside X, or past M / KH * C)
    Y = A @ W                                         (Y: M x N, float32)

The gather is a `T.Parallel` store into a shared tile, either under an explicit predicate
(`T.if_then_else(inside, X[...], 0)`) or bare, relying on out-of-bounds reads being 0
(SEMANTICS.md §3.7). Channel counts 1..24 reach every copy width (16/8/4 bytes and the
synchronous fallback); stride, padding, ragged M/N/K, stages 1..3 and the tile sizes vary.
"""

from __future__ import annotations

import numpy as np

from .case import (EPS, Case, Param, default_inputs, kernel_source, pick,
                   pipelined_gemm_head)


def sample(rng, seed: int) -> Case:
    C = int(pick(rng, (1, 2, 3, 4, 8, 8, 16, 16, 24)))
    KH = int(pick(rng, (1, 2, 3)))
    stride = int(pick(rng, (1, 1, 2)))
    pad = int(pick(rng, (0, 1, 2)))
    R = int(rng.integers(max(1, KH - 2 * pad), 160))
    spec = dict(dt=pick(rng, ("float16", "float16", "bfloat16")), C=C, KH=KH, stride=stride,
                pad=pad, R=R, N=int(rng.integers(1, 80)),
                bm=int(pick(rng, (32, 64, 128))), bn=int(pick(rng, (32, 64))),
                bk=int(pick(rng, (16, 32, 64))), threads=int(pick(rng, (128, 256))),
                stages=int(pick(rng, (1, 2, 2, 3))),
                predicate=bool(pick(rng, (True, True, False))))
    spec["M"] = (R + 2 * pad - KH) // stride + 1
    return build(spec, seed)


def build(s: dict, seed: int) -> Case:
    dt, C, KH, stride, pad, R, M, N = (s[k] for k in ("dt", "C", "KH", "stride", "pad", "R",
                                                      "M", "N"))
    bm, bn, bk = s["bm"], s["bn"], s["bk"]
    K = KH * C
    params = [Param("X", (R, C), dt), Param("W", (K, N), dt), Param("Y", (M, N), "float32",
                                                                     "out")]
    i1, i2, i3 = ("    " * n for n in range(1, 4))
    k = pipelined_gemm_head(s, M, N, K) + [
        i2 + f"for i, j in T.Parallel({bm}, {bk}):",
        i3 + f"m = by * {bm} + i",
        i3 + f"k = ko * {bk} + j",
        i3 + f"r = m * {stride} + k // {C} - {pad}"]
    if s["predicate"]:
        k += [i3 + f"inside = (m < {M}) and (k < {K}) and (r >= 0) and (r < {R})",
              i3 + f"A_s[i, j] = T.if_then_else(inside, X[r, k % {C}], 0)"]
    else:
        # rows outside X read 0 by the out-of-bounds rule; columns past K meet zero rows of
        # W_s (its copy zero-fills past K), so no predicate is needed for a correct product
        k += [i3 + f"A_s[i, j] = X[r, k % {C}]"]
    k += [i2 + f"T.copy(W[ko * {bk}, bx * {bn}], W_s)",
          i2 + "T.gemm(A_s, W_s, acc)",
          i1 + f"T.copy(acc, Y[by * {bm}, bx * {bn}])"]
    feats = ("gather", "gemm", "pipelined") + (("predicated_gather",) if s["predicate"] else ())
    return Case("gather", seed, kernel_source(params, k), params,
                default_inputs(params), lambda arrs: _oracle(s, arrs),
                spec=s, features=feats)


def _im2col(s, X):
    M, C, KH, stride, pad, R = (s[k] for k in ("M", "C", "KH", "stride", "pad", "R"))
    A = np.zeros((M, KH * C))
    for m in range(M):
        for kh in range(KH):
            r = m * stride + kh - pad
            if 0 <= r < R:
                A[m, kh * C:(kh + 1) * C] = X[r]
    return A


def _oracle(s, arrs):
    A = _im2col(s, np.asarray(arrs["X"], np.float64))
    W = np.asarray(arrs["W"], np.float64)
    Y = A @ W
    mag = np.abs(A) @ np.abs(W)
    K = s["KH"] * s["C"]
    tol = 2 * ((K / 8 + 2) * EPS["float32"] * mag) + 1e-30
    return {"Y": (Y, tol)}
