"""A tile-configuration recommender for GEMM-like kernels (our own model, not the reference's
roller): enumerate block tiles, warp partitions, K steps and pipeline depths that the device
can hold, estimate each one's time, return the fastest.

Candidates: block M x N from {32, 64, 128, 256}^2, K steps from {32, 64, 128}, 4 or 8 warps
split into a warp grid whose warp tiles are multiples of the mma atom (16 x 8), 1-4 pipeline
stages. A candidate must fit the device's shared memory (A and B stages) and keep the
accumulator within 128 registers per thread.

Estimate: the kernel runs `waves` rounds of `resident` blocks (SMs x blocks per SM, limited
by shared memory, threads and registers); a block's tile costs its tensor-core time (2·bm·bn·K
at the SM's share of the peak) and its global-memory time (bm+bn rows of K at its share of
the bandwidth), overlapped when pipelined (stages >= 2), summed otherwise. Padding (M or N not
a multiple of the tile) is paid in full, so tiles that fit the problem win.
"""

from __future__ import annotations

import math

from ...ir.dtype import DType
from .hint import Hint
from .rasterization import NoRasterization, Rasterization2DRow

__all__ = ["recommend_gemm_hints"]

# sm -> dense fp16 tensor-core TFLOPS of the flagship part (int8/fp8 count twice)
_PEAK_TFLOPS = {70: 125.0, 75: 65.0, 80: 312.0, 86: 155.0, 89: 362.0, 90: 989.0}
_BLOCK_MN = (32, 64, 128, 256)
_BLOCK_K = (32, 64, 128)
_WARPS = (4, 8)
_STAGES = (1, 2, 3, 4)


def _peak_flops(arch, in_dtype: DType) -> float:
    sm = getattr(arch, "sm_version", 80)
    tf = _PEAK_TFLOPS.get(sm) or _PEAK_TFLOPS[max(k for k in _PEAK_TFLOPS if k <= max(sm, 70))]
    if in_dtype.bits == 8:
        tf *= 2
    elif in_dtype.bits == 32:
        tf /= 2  # tf32
    return tf * 1e12


def _warp_grids(bm: int, bn: int, warps: int):
    """(warp rows, warp cols) splitting the tile into warp tiles of whole mma atoms, the most
    square warp tile first."""
    out = []
    for wr in range(1, warps + 1):
        if warps % wr:
            continue
        wc = warps // wr
        wm, wn = bm // wr if bm % wr == 0 else 0, bn // wc if bn % wc == 0 else 0
        if wm >= 16 and wm % 16 == 0 and wn >= 8 and wn % 8 == 0:
            out.append((abs(math.log2(wm / wn)), wm, wn))
    return [(wm, wn) for _, wm, wn in sorted(out)]


def recommend_gemm_hints(M: int, N: int, K: int, in_dtype="float16", accum_dtype="float32",
                         arch=None, topk: int = 10) -> list:
    """The `topk` best configurations for C[M, N] = A[M, K] @ B[K, N] on `arch` (a
    `carver.arch.CUDA`), best first; each a `Hint`."""
    if arch is None:
        raise ValueError("recommend_gemm_hints needs a device description (carver.arch.CUDA)")
    for name, v in (("M", M), ("N", N), ("K", K)):
        if not isinstance(v, int) or v <= 0:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    in_dt, acc_dt = DType(in_dtype), DType(accum_dtype)
    elem = in_dt.bytes
    sms = max(1, int(arch.compute_max_core))
    smem_cap = int(arch.smem_cap)
    per_sm_flops = _peak_flops(arch, in_dt) / sms
    bandwidth = float(arch.bandwidth[1]) * 1e6  # MB/s -> B/s
    scored = []
    for bm in _BLOCK_MN:
        for bn in _BLOCK_MN:
            for warps in _WARPS:
                threads = warps * 32
                acc_regs = bm * bn * max(1, acc_dt.bits // 32) // threads
                if acc_regs > 128 or acc_regs < 1:
                    continue
                grids = _warp_grids(bm, bn, warps)
                if not grids:
                    continue
                for bk in _BLOCK_K:
                    for stages in _STAGES:
                        smem = (bm + bn) * bk * elem * stages
                        if smem > smem_cap:
                            continue
                        t = _estimate(M, N, K, bm, bn, bk, stages, threads, acc_regs, smem,
                                      smem_cap, sms, per_sm_flops, bandwidth, elem)
                        scored.append((t, -bm * bn, stages, bm, bn, bk, grids[0], threads))
    scored.sort()
    hints = []
    for t, _, stages, bm, bn, bk, (wm, wn), _threads in scored[:max(0, topk)]:
        h = Hint()
        h.arch = arch
        h.block, h.warp, h.rstep = [bm, bn], [wm, wn], [bk]
        h.pipeline_stage = stages
        h.use_async = stages > 1
        tiles_m, tiles_n = -(-M // bm), -(-N // bn)
        h.rasterization_plan = Rasterization2DRow(10) if tiles_m * tiles_n > sms and \
            min(tiles_m, tiles_n) >= 4 else NoRasterization()
        h.score = t
        hints.append(h)
    return hints


def _estimate(M, N, K, bm, bn, bk, stages, threads, acc_regs, smem, smem_cap, sms,
              per_sm_flops, bandwidth, elem) -> float:
    per_sm = min(max(1, smem_cap // max(1, smem)), 2048 // threads,
                 65536 // (threads * (acc_regs + 48)))
    per_sm = max(1, per_sm)
    resident = sms * per_sm
    tiles = -(-M // bm) * -(-N // bn)
    waves = -(-tiles // resident)
    k_padded = -(-K // bk) * bk
    compute = 2.0 * bm * bn * k_padded / (per_sm_flops / per_sm)
    memory = (bm + bn) * k_padded * elem / (bandwidth / min(tiles, resident))
    tile = max(compute, memory) if stages >= 2 else compute + memory
    if stages >= 2:
        tile *= 1.0 + 0.1 / (stages - 1)  # deeper pipelines hide more latency
    return waves * tile
