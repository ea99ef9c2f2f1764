"""FP8 GEMM: C = (A @ B^T) * scale with float8_e4m3 inputs, float32 accumulation and a
bfloat16 result.

    python examples/gemm/example_gemm_fp8.py

The layout is the one FP8 tensor cores want: both A (M x K) and B (N x K) are K-major, so the
kernel multiplies with `transpose_B=True`; on sm_90a that T.gemm is an m64nNk32 wgmma
(e4m3 x e4m3 -> f32) reading 128-byte-swizzled tiles that TMA loads (128 fp8 = 128 bytes of
K per row). The per-tensor scale (the product of the two quantisation scales) is a run-time
scalar applied to the accumulator before the store, which is what `torch._scaled_mm` computes
with scalar scales. FP8 tensor cores need sm_89 or newer.

Runs on the GPU when there is one, else on the CPU interpreter at a small size.
"""

import torch

import tilelang
import tilelang.language as T

FP8 = torch.float8_e4m3fn
ARCHS = ("sm_89", "sm_90a")  # FP8 tensor cores: Ada and Hopper (none on sm_80)


@tilelang.jit(out_idx=[2])
def matmul_fp8(M, N, K, block_M=128, block_N=128, block_K=128, num_stages=4, threads=128,
               dtype="float8_e4m3", accum_dtype="float32", out_dtype="bfloat16"):

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype),
             C: T.Tensor((M, N), out_dtype), scale: T.float32):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = C_local[i, j] * scale
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


# (M, N, K, tile config); K stays a multiple of 16 (16-byte rows for the fp8 loads)
SIZES = {
    "small": (200, 136, 96, dict(block_M=64, block_N=64)),
    "medium": (1000, 1000, 1008, dict()),
    # two consumer warpgroups, each one m64n256k32 wgmma per 32 of K; 4 x 48 KB stages
    # (benchmarks/sweeps/fp8_gemm.py compares the neighbours)
    "bench": (8192, 8192, 8192, dict(block_N=256, block_K=128, num_stages=4, threads=256)),
}


def check(out, ref, tol):
    assert not torch.isnan(out).any(), "NaN in the output"
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < tol, f"relative error {err:.2e} exceeds {tol:.0e}"
    return err


def fit_config(cfg, arch):
    """Ada (sm_89) has 99 KB of shared memory per block: two stages of the big tiles fit."""
    if int(arch.split("_")[1].rstrip("a")) < 90:
        return dict(cfg, num_stages=2)
    return cfg


def programs(size="bench", arch="sm_90a"):
    M, N, K, cfg = SIZES[size]
    return [("gemm_fp8_e4m3", matmul_fp8.get_tir(M, N, K, **fit_config(cfg, arch)))]


def quantize(x):
    """Per-tensor scaling into the e4m3 range; returns (fp8 tensor, scale)."""
    scale = x.abs().max().float().clamp_min(1e-12) / 448.0
    return (x / scale).to(FP8), scale


def run(device=None, size="small"):
    """Build the kernel, check it against torch on fresh random inputs, and return
    [{name, tilelang, baseline, baseline_name, flops, error}]."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    M, N, K, cfg = SIZES[size]
    if device == "cuda":
        cfg = fit_config(cfg, "sm_%d%d" % torch.cuda.get_device_capability())
    kernel = matmul_fp8(M, N, K, **cfg)
    a, sa = quantize(torch.randn(M, K, device=device))
    b, sb = quantize(torch.randn(N, K, device=device))
    scale = float(sa * sb)
    out = kernel(a, b, scale)
    # exact products of the fp8 values, accumulated in float64; the only rounding left is the
    # bfloat16 store (rel. 2^-9)
    ref = (a.double() @ b.double().t()) * scale
    err = check(out, ref, 5e-3)

    scale_a = sa.reshape(()).to(device)
    scale_b = sb.reshape(()).to(device)

    def baseline():
        # cuBLASLt FP8 GEMM; wants B column-major, i.e. the transpose of a row-major (N, K)
        return torch._scaled_mm(a, b.t(), scale_a=scale_a, scale_b=scale_b,
                                out_dtype=torch.bfloat16)

    return [dict(name=f"gemm fp8 e4m3 -> bf16 {M}x{N}x{K}", tilelang=lambda: kernel(a, b, scale),
                 baseline=baseline, baseline_name="torch._scaled_mm (cuBLASLt)",
                 flops=2.0 * M * N * K, error=err)]


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
