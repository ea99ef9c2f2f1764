"""Seed 000 (tutorial: fused GEMM + scale + ReLU) on the CPU interpreter.

The kernel below is byte-for-byte the tutorial's `matmul_scale_relu`; the CUDA timing helper
of the tutorial is not run here. Sizes are small (and ragged) so the interpreter is quick.
"""

import pytest
import torch

import tilelang
import tilelang.language as T

# ---- from the tutorial (verbatim) --------------------------------------------------------------
@tilelang.jit(out_idx=[2])
def matmul_scale_relu(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def gemm_fused(
            A: T.Tensor((M, K), dtype),
            B: T.Tensor((K, N), dtype),
            C: T.Tensor((M, N), dtype),
            scale: T.float32, 
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)

                T.gemm(A_shared, B_shared, C_local)

            for i, j in T.Parallel(block_M, block_N):
                v_acc = C_local[i, j]
                v_scaled = v_acc * scale
                v_relu = T.max(v_scaled, T.float32(0.0))
                C_local[i, j] = v_relu

            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_fused
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("M,N,K", [(256, 192, 128), (200, 136, 72), (64, 64, 32)])
@pytest.mark.parametrize("scale_val", [0.5, -1.25])
def test_fused_gemm_scale_relu(M, N, K, scale_val):
    a = torch.randn(M, K).half()
    b = torch.randn(K, N).half()
    tl_kernel = matmul_scale_relu(M, N, K, 64, 64, 32)
    c_tl = tl_kernel(a, b, scale_val)
    assert c_tl.shape == (M, N) and c_tl.dtype == torch.float16
    ref_c = torch.relu((a.double() @ b.double()) * scale_val)
    torch.testing.assert_close(c_tl.double(), ref_c, rtol=1e-2, atol=1e-2)
    assert (c_tl >= 0).all()


def test_kernel_is_cached_and_checks_arguments():
    k1 = matmul_scale_relu(64, 64, 64, 64, 64, 32)
    assert matmul_scale_relu(64, 64, 64, 64, 64, 32) is k1
    a = torch.randn(64, 64).half()
    with pytest.raises(ValueError, match="expected 3 inputs"):
        k1(a, a)
    with pytest.raises(TypeError):
        k1(a, a, "0.5")


def test_scalar_accepts_int_and_bool():
    a = torch.randn(64, 32).half()
    b = torch.randn(32, 64).half()
    k = matmul_scale_relu(64, 64, 32, 64, 64, 32)
    ref = torch.relu((a.double() @ b.double()) * 2)
    torch.testing.assert_close(k(a, b, 2).double(), ref, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(k(a, b, True).double(), torch.relu(a.double() @ b.double()),
                               rtol=1e-2, atol=1e-2)
