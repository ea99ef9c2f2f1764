"""FP8 GEMM kernels shared by the CPU (codegen) and GPU tests of the fp8 wgmma lowering."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tests.gpu import kernels  # noqa: E402


def fp8_gemm(M, N, K, block_M=128, block_N=128, block_K=128, num_stages=3, threads=128,
             a_dtype="float8_e4m3", b_dtype="float8_e4m3", out_dtype="float32",
             trans_A=False, trans_B=True, a_in_registers=False):
    """C = op(A) @ op(B) with fp32 accumulation; A is M x K (K x M with trans_A), B is N x K
    (K x N without trans_B). `a_in_registers` copies the A tile into a fragment first (the
    wgmma RS form)."""
    return kernels.gemm(M, N, K, block_M, block_N, block_K, trans_A=trans_A, trans_B=trans_B,
                        dtype=a_dtype, b_dtype=b_dtype, accum_dtype="float32", out_dtype=out_dtype,
                        num_stages=num_stages, threads=threads, a_in_registers=a_in_registers)


def fp8_gemm_two_level(M, N, K, block_M=128, block_N=128, block_K=64, interval=2,
                       num_stages=3, threads=128, dtype="float8_e4m3"):
    """C = A @ B^T (A M x K, B N x K, fp8) summed on two levels, as fp8 GEMMs do to keep the
    tensor cores' short accumulation exact enough: each `interval` k-steps the wgmma partial
    sum is added into a second fp32 fragment and restarted from zero; a partial left at the
    end (a K-step count not a multiple of `interval`) is added after the loop."""
    import tilelang.language as T

    steps = (K + block_K - 1) // block_K

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_N, block_K), dtype)
            part = T.alloc_fragment((block_M, block_N), "float32")
            total = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(part)
            T.clear(total)
            for k in T.Pipelined(steps, num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, part, transpose_B=True)
                if (k + 1) % interval == 0:
                    for i, j in T.Parallel(block_M, block_N):
                        total[i, j] = total[i, j] + part[i, j]
                    T.clear(part)
            if steps % interval != 0:
                for i, j in T.Parallel(block_M, block_N):
                    total[i, j] = total[i, j] + part[i, j]
            T.copy(total, C[by * block_M, bx * block_N])

    return main
