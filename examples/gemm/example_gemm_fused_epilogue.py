"""GEMM with a fused epilogue: C = ReLU((A @ B) * scale).

    python examples/gemm/example_gemm_fused_epilogue.py

The kernel of the "attention operator" tutorial (seed document 000): after the K loop the
accumulator tile is still in registers, so the scale and the ReLU are applied there by a
`T.Parallel` loop before the single store to global memory. PyTorch needs three kernels
(matmul, mul, relu) and two extra round trips through global memory for the same result.
`scale` is a run-time scalar parameter: `kernel(a, b, 0.5)`.

Runs on the GPU when there is one, else on the CPU interpreter at a small size.
"""

import torch

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def matmul_scale_relu(M, N, K, block_M=64, block_N=64, block_K=32, num_stages=3, threads=128,
                      dtype="float16", accum_dtype="float"):

    @T.prim_func
    def gemm_fused(
            A: T.Tensor((M, K), dtype),
            B: T.Tensor((K, N), dtype),
            C: T.Tensor((M, N), dtype),
            scale: T.float32,
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)

            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)

            # the epilogue, on the accumulator registers
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j] * scale, T.float32(0.0))

            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_fused


SIZES = {
    "small": (200, 136, 72, dict()),
    "medium": (1000, 1000, 1000, dict()),
    # the tutorial's shape and tiles, and a large one with bigger tiles
    "bench": (1024, 1024, 1024, dict()),
    "bench_large": (8192, 8192, 8192, dict(block_M=128, block_N=256, block_K=64, threads=256)),
}


def check(out, ref, tol):
    assert not torch.isnan(out).any(), "NaN in the output"
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < tol, f"relative error {err:.2e} exceeds {tol:.0e}"
    return err


def programs(size="bench"):
    out = []
    for key in (("bench", "bench_large") if size == "bench" else (size,)):
        M, N, K, cfg = SIZES[key]
        out.append((f"gemm_scale_relu_{key}", matmul_scale_relu.get_tir(M, N, K, **cfg)))
    return out


def run(device=None, size="small"):
    """Build the kernel(s), check against torch on fresh random inputs, and return
    [{name, tilelang, baseline, baseline_name, flops, error}]."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    cases = []
    for key in (("bench", "bench_large") if size == "bench" else (size,)):
        M, N, K, cfg = SIZES[key]
        kernel = matmul_scale_relu(M, N, K, **cfg)
        a = torch.randn(M, K, device=device).half()
        b = torch.randn(K, N, device=device).half()
        scale = 0.5
        err = check(kernel(a, b, scale), torch.relu((a.double() @ b.double()) * scale), 2e-3)
        cases.append(dict(
            name=f"gemm+scale+relu fp16 {M}x{N}x{K}",
            tilelang=lambda kernel=kernel, a=a, b=b: kernel(a, b, scale),
            baseline=lambda a=a, b=b: torch.relu((a @ b) * scale),
            baseline_name="torch eager (cuBLAS + 2 kernels)", flops=2.0 * M * N * K, error=err))
    return cases


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
