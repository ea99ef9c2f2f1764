"""Seed 003 (overview: quick-start GEMM + ReLU) on the CPU interpreter.

The kernel below is byte-for-byte the quick-start `matmul`; the caller allocates `c` and passes
it (no `out_idx`), as in the document. The profiler lines of the document are not run.
"""

import pytest
import torch

import tilelang
import tilelang.language as T

# ---- from the document (verbatim) --------------------------------------------------------------
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
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("M,N,K,block_M,block_N,block_K", [
    (256, 256, 256, 128, 128, 32),
    (256, 192, 128, 64, 64, 32),
    (200, 136, 72, 64, 64, 32),
])
def test_quickstart_gemm_relu(M, N, K, block_M, block_N, block_K):
    matmul_relu_kernel = matmul(M, N, K, block_M, block_N, block_K)

    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    c = torch.full((M, N), float("nan"), dtype=torch.float16)

    result = matmul_relu_kernel(a, b, c)
    assert not result  # no out_idx: results are written into c
    ref_c = torch.relu(a.double() @ b.double())
    torch.testing.assert_close(c.double(), ref_c, rtol=1e-2, atol=1e-2)
