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
