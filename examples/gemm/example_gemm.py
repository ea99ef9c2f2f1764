"""GEMM: C = A @ B in float16 with float32 accumulation.

    python examples/gemm/example_gemm.py

The classic tiled GEMM. Each block owns a block_M x block_N tile of C held in registers
(`alloc_fragment`); it walks K in steps of block_K, staging tiles of A and B in shared memory,
and `T.gemm` multiplies them on the tensor cores. `T.Pipelined(..., num_stages=3)` overlaps
the loads of later K-steps with the math of the current one. Out-of-range rows and columns
(M, N, K not multiples of the tile) read zeros and are not written.

Tile choice for a large GEMM on Hopper (the "bench" size): 128 x 256 tiles with 256 threads
give each of two warpgroups a 64 x 256 wgmma tile, and block_K = 64 moves 128-byte rows of A
(a full 128-byte swizzle) per TMA load and halves the number of pipeline steps against
block_K = 32. The K loop becomes a producer warpgroup issuing TMA loads into a 3-stage ring
while the two consumer warpgroups run wgmma.

Runs on the GPU when there is one, else on the CPU interpreter at a small size.
"""

import torch

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def matmul(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128,
           dtype="float16", accum_dtype="float32"):

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


# (M, N, K, tile config); "small" is ragged on purpose.
SIZES = {
    "small": (200, 136, 72, dict(block_M=64, block_N=64, block_K=32)),
    "medium": (1000, 1000, 1000, dict()),
    "bench": (8192, 8192, 8192, dict(block_M=128, block_N=256, block_K=64, num_stages=3,
                                     threads=256)),
}


def check(out, ref, tol):
    assert not torch.isnan(out).any(), "NaN in the output"
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < tol, f"relative error {err:.2e} exceeds {tol:.0e}"
    return err


def programs(size="bench"):
    M, N, K, cfg = SIZES[size]
    return [("gemm", matmul.get_tir(M, N, K, **cfg))]


def run(device=None, size="small"):
    """Build the kernel, check it against torch on fresh random inputs, and return
    [{name, tilelang, baseline, baseline_name, flops, error}]."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    M, N, K, cfg = SIZES[size]
    kernel = matmul(M, N, K, **cfg)
    a = torch.randn(M, K, device=device, dtype=torch.float16)
    b = torch.randn(K, N, device=device, dtype=torch.float16)
    err = check(kernel(a, b), a.double() @ b.double(), 2e-3)
    return [dict(name=f"gemm fp16 {M}x{N}x{K}", tilelang=lambda: kernel(a, b),
                 baseline=lambda: a @ b, baseline_name="torch.matmul (cuBLAS)",
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
