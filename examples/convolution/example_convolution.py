"""2-D convolution as an implicit GEMM (im2col on the fly), NHWC layout.

    python examples/convolution/example_convolution.py

A convolution is a GEMM in disguise: row m of the "im2col" matrix is output pixel
(n, oh, ow), column k is filter tap (kh, kw, c), and the filter is a (KH*KW*C) x F matrix.
The kernel never builds the im2col matrix in memory: for every K-step a `T.Parallel` loop
decodes (n, oh, ow) and (kh, kw, c) from the tile coordinates, computes the input pixel
(stride, padding, dilation) and gathers it into shared memory, writing 0 for taps that fall
into the padding. The filter tile is a plain `T.copy`; `T.gemm` does the rest, and the result
tile is stored through an (N*OH*OW, F) view of the output (its rows are the output pixels).

For square filters the kernel writes that gather with the reference's helper,
`T.c2d_im2col(data, data_shared, by, k, KH, stride, dilation, padding)`; for others, as the
explicit `T.Parallel` loop. Either way the gather is a producer stage of the pipeline like the
filter copy:
- On Hopper, when C is a multiple of block_K, the helper's tile is one TMA load in im2col mode
  (transform/warp_specialize/tma_im2col.py), issued by a producer warpgroup while two consumer warpgroups run
  the wgmma gemms: the addresses are the TMA unit's work, not the threads'.
- Elsewhere it is issued `num_stages - 1` iterations ahead as cp.async with zero-fill (16-byte
  copies when C % 8 == 0; transform/partition_parallel/async_gather.py), and on Hopper each wgmma runs while the
  threads compute the next stage's addresses.
With `num_blocks`, that many blocks (one per multiprocessor) walk the output tiles
(`T.Persistent`) instead of one block per tile: on Hopper the producer then loads a block's
next tile while its consumers store this one, which the short K loop of a convolution (36
steps here) feels. The defaults (128x256x64 tiles, two consumer warpgroups, persistent on
Hopper) suit an H200; see benchmarks/sweeps/conv.py for the alternatives.

The input is (N, H, W, C); the filter is given as (KH*KW*C, F), i.e. an HWIO filter
flattened over its first three dimensions; the output is (N, OH, OW, F).

Runs on the GPU when there is one, else on the CPU interpreter at a small size.
"""

import torch

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def convolution(N, C, H, W, F, KH, KW, stride=1, padding=0, dilation=1, block_M=128,
                block_N=256, block_K=64, num_stages=3, threads=256, num_blocks=None,
                dtype="float16", accum_dtype="float"):
    """num_blocks=None: one block per output tile; an int: that many blocks walk the tiles
    (T.Persistent), so each block's next tile loads while it stores this one."""
    OH = (H + 2 * padding - dilation * (KH - 1) - 1) // stride + 1
    OW = (W + 2 * padding - dilation * (KW - 1) - 1) // stride + 1
    M, K = N * OH * OW, KH * KW * C

    @T.macro
    def output_tile(data, weight, out, data_shared, weight_shared, out_local, by, bx):
        T.clear(out_local)
        for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            # im2col gather of a (block_M x block_K) tile
            if KH == KW:  # the reference's helper (on sm_90a: one TMA load, im2col mode)
                T.c2d_im2col(data, data_shared, by, ko, KH, stride, dilation, padding)
            else:
                for i, j in T.Parallel(block_M, block_K):
                    m = by * block_M + i
                    k = ko * block_K + j
                    n, oh, ow = m // (OH * OW), m % (OH * OW) // OW, m % OW
                    kh, kw, c = k // (KW * C), k % (KW * C) // C, k % C
                    ih = oh * stride + kh * dilation - padding
                    iw = ow * stride + kw * dilation - padding
                    inside = (m < M) and (k < K) and (ih >= 0) and (ih < H) and \
                        (iw >= 0) and (iw < W)
                    data_shared[i, j] = T.if_then_else(inside, data[n, ih, iw, c], 0)
            T.copy(weight[ko * block_K, bx * block_N], weight_shared)
            T.gemm(data_shared, weight_shared, out_local)

        # NHWC output rows are the im2col rows: store the tile through an (M, F) view
        out_flat = T.Tensor((M, F), dtype, out.data)
        T.copy(out_local, out_flat[by * block_M, bx * block_N])

    if num_blocks is None:
        @T.prim_func
        def main(data: T.Tensor((N, H, W, C), dtype), weight: T.Tensor((K, F), dtype),
                 out: T.Tensor((N, OH, OW, F), dtype)):
            with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(M, block_M),
                          threads=threads) as (bx, by):
                data_shared = T.alloc_shared((block_M, block_K), dtype)
                weight_shared = T.alloc_shared((block_K, block_N), dtype)
                out_local = T.alloc_fragment((block_M, block_N), accum_dtype)
                output_tile(data, weight, out, data_shared, weight_shared, out_local, by, bx)
    else:
        @T.prim_func
        def main(data: T.Tensor((N, H, W, C), dtype), weight: T.Tensor((K, F), dtype),
                 out: T.Tensor((N, OH, OW, F), dtype)):
            with T.Kernel(num_blocks, threads=threads) as block_id:
                data_shared = T.alloc_shared((block_M, block_K), dtype)
                weight_shared = T.alloc_shared((block_K, block_N), dtype)
                out_local = T.alloc_fragment((block_M, block_N), accum_dtype)
                # consecutive blocks take neighbouring pixel rows (their input rows overlap)
                for by, bx in T.Persistent([T.ceildiv(M, block_M), T.ceildiv(F, block_N)],
                                           num_blocks, block_id):
                    output_tile(data, weight, out, data_shared, weight_shared, out_local,
                                by, bx)

    return main


# (N, C, H, W, F, KH, KW, stride, padding, dilation, tile config)
SIZES = {
    "small": (2, 12, 9, 11, 20, 3, 3, 1, 1, 1, dict(block_M=64, block_N=64, block_K=32,
                                                     threads=128)),
    "medium": (3, 64, 29, 31, 96, 3, 3, 2, 1, 2, dict(block_N=128, threads=128, num_blocks=5)),
    # H200 (benchmarks/sweeps/conv.py): two warpgroups on 128x256 tiles, one block per
    # multiprocessor (132 on an H100/H200; run() asks the GPU) walking the tiles, 3 stages
    # so that the epilogue's 64 KB staging buffer fits beside them
    "bench": (128, 256, 28, 28, 256, 3, 3, 1, 1, 1, dict(block_M=128, block_N=256, block_K=64,
                                                         num_stages=3, threads=256,
                                                         num_blocks=132)),
}
# Ampere has less shared memory per block than Hopper: one block per tile, 3 stages.
SM80_CONFIG = dict(num_stages=3, num_blocks=None)


def check(out, ref, tol):
    assert not torch.isnan(out).any(), "NaN in the output"
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < tol, f"relative error {err:.2e} exceeds {tol:.0e}"
    return err


def programs(size="bench", arch="sm_90a"):
    N, C, H, W, F, KH, KW, s, p, d, cfg = SIZES[size]
    if arch != "sm_90a" and size == "bench":
        cfg = {**cfg, **SM80_CONFIG}
    return [("conv2d_im2col", convolution.get_tir(N, C, H, W, F, KH, KW, s, p, d, **cfg))]


def run(device=None, size="small"):
    """Build the kernel, check it against torch's conv2d (float64) on fresh random inputs, and
    return [{name, tilelang, baseline, baseline_name, flops, error}]."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    N, C, H, W, F, KH, KW, s, p, d, cfg = SIZES[size]
    if device == "cuda" and size == "bench":
        if torch.cuda.get_device_capability() < (9, 0):
            cfg = {**cfg, **SM80_CONFIG}
        else:
            cfg = {**cfg, "num_blocks": torch.cuda.get_device_properties(0).multi_processor_count}
    kernel = convolution(N, C, H, W, F, KH, KW, s, p, d, **cfg)
    x = torch.randn(N, H, W, C, device=device, dtype=torch.float16)        # NHWC
    w = torch.randn(KH, KW, C, F, device=device, dtype=torch.float16)      # HWIO
    out = kernel(x, w.reshape(KH * KW * C, F))

    x_nchw = x.permute(0, 3, 1, 2)           # channels-last views: no copies
    w_oihw = w.permute(3, 2, 0, 1)
    ref = torch.nn.functional.conv2d(x_nchw.double(), w_oihw.double(), stride=s, padding=p,
                                     dilation=d).permute(0, 2, 3, 1)
    err = check(out, ref, 2e-3)

    w_cl = w_oihw.contiguous(memory_format=torch.channels_last)

    def baseline():
        return torch.nn.functional.conv2d(x_nchw, w_cl, stride=s, padding=p, dilation=d)

    OH, OW = ref.shape[1], ref.shape[2]
    return [dict(name=f"conv2d fp16 N{N} {H}x{W} C{C}->F{F} {KH}x{KW} s{s} p{p} d{d}",
                 tilelang=lambda: kernel(x, w.reshape(KH * KW * C, F)), baseline=baseline,
                 baseline_name="torch conv2d (cuDNN, channels_last)",
                 flops=2.0 * N * OH * OW * F * KH * KW * C, error=err)]


def main():
    gpu = torch.cuda.is_available()
    for case in run("cuda" if gpu else "cpu", "bench" if gpu else "small"):
        line = f"{case['name']}: relative error {case['error']:.1e}"
        if gpu:
            from tilelang.profiler import do_bench

            ms = do_bench(case["tilelang"], return_mode="median")
            ref_ms = do_bench(case["baseline"], return_mode="median")
            line += (f", {ms:.4f} ms ({case['flops'] / ms * 1e-9:.1f} TFLOP/s), "
                     f"{case['baseline_name']} {ref_ms:.4f} ms, speedup {ref_ms / ms:.2f}x")
        print(line)


if __name__ == "__main__":
    main()
