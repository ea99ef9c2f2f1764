"""Quickstart: the GEMM + ReLU kernel of the TileLang overview (seed 003).

Runs on the GPU when there is one, on the CPU interpreter otherwise:

    python examples/quickstart.py
"""

import torch

import tilelang
import tilelang.language as T


@tilelang.jit
def matmul(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float"):

    @T.prim_func
    def matmul_relu_kernel(
            A: T.Tensor((M, K), dtype),
            B: T.Tensor((K, N), dtype),
            C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.clear(C_local)

            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)

            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)

            T.copy(C_local, C[by * block_M, bx * block_N])

    return matmul_relu_kernel


def main():
    gpu = torch.cuda.is_available()
    device = "cuda" if gpu else "cpu"
    # the CPU interpreter is numpy: a smaller problem keeps the demo quick
    M = N = K = 1024 if gpu else 256
    block_M = block_N = 128
    block_K = 32
    matmul_relu_kernel = matmul(M, N, K, block_M, block_N, block_K)

    a = torch.randn(M, K, device=device, dtype=torch.float16)
    b = torch.randn(K, N, device=device, dtype=torch.float16)
    c = torch.empty(M, N, device=device, dtype=torch.float16)

    matmul_relu_kernel(a, b, c)
    ref_c = torch.relu(a.float() @ b.float()).half()
    torch.testing.assert_close(c, ref_c, rtol=1e-2, atol=1e-2)
    print(f"GEMM+ReLU {M}x{N}x{K} on {'the GPU' if gpu else 'the CPU interpreter'}: "
          "matches torch")

    profiler = matmul_relu_kernel.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Normal)
    latency = profiler.do_bench()
    unit = "ms"
    print(f"latency: {latency:.4f} {unit}")
    if gpu:
        print(f"throughput: {2 * M * N * K / (latency * 1e-3) / 1e12:.1f} TFLOP/s")


if __name__ == "__main__":
    main()
