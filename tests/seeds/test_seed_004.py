"""Seed 004 (blog: L2-friendly GEMM with T.use_swizzle) on the CPU interpreter.

The two kernel factories below are byte-for-byte the blog's `kernel_matmul` and
`kernel_matmul_no_l2_opt` (the second also copies B into shared memory element-wise with
T.Parallel). As in the blog: `str(kernel)` prints the IR, `tilelang.compile(kernel, out_idx=-1)`
builds it, `get_kernel_source()` returns the CUDA (for sm_90a on a machine without a GPU, as
the blog writes it to matmul.kernel.cu). The triton benchmark
is not run. Swizzling renumbers blocks only, so every panel size gives the same result.
"""

import pytest
import torch

import tilelang
import tilelang.language as T

# ---- from the blog (verbatim) ------------------------------------------------------------------
def kernel_matmul(
    M, N, K, block_M, block_N, block_K, dtype, accum_dtype, panel_size=10
):
    @T.prim_func
    def gemm_schedule(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (
            bx,
            by,
        ):
            T.use_swizzle(panel_size=panel_size)
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                for k, j in T.Parallel(block_K, block_N):
                    B_shared[k, j] = B[ko * block_K + k, bx * block_N + j]
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_schedule


def kernel_matmul_no_l2_opt(
    M, N, K, block_M, block_N, block_K, dtype, accum_dtype, panel_size=10
):
    @T.prim_func
    def gemm_schedule(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (
            bx,
            by,
        ):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                for k, j in T.Parallel(block_K, block_N):
                    B_shared[k, j] = B[ko * block_K + k, bx * block_N + j]
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_schedule
# ------------------------------------------------------------------------------------------------

SIZES = [(256, 192, 128), (200, 136, 72)]


def test_kernel_source_is_cuda(tmp_path):
    """The blog saves `get_kernel_source()` as matmul.kernel.cu: CUDA here too, without a GPU
    (for sm_90a)."""
    tilelang_matmul = tilelang.compile(kernel_matmul(256, 192, 128, 128, 128, 32, "float16",
                                                     "float", 10), out_idx=-1)
    with open(tmp_path / "matmul.kernel.cu", "w") as f:
        f.write(tilelang_matmul.get_kernel_source())
    text = (tmp_path / "matmul.kernel.cu").read_text()
    assert "__global__" in text and "rasterize" in text  # T.use_swizzle(10) is in the CUDA


@pytest.mark.parametrize("M,N,K", SIZES)
@pytest.mark.parametrize("panel_size", [0, 10, 20])
def test_swizzled_gemm(M, N, K, panel_size):
    kernel = kernel_matmul(M, N, K, 128, 128, 32, "float16", "float", panel_size)
    text = str(kernel)
    assert "def gemm_schedule" in text and "T.gemm" in text
    tilelang_matmul = tilelang.compile(kernel, out_idx=-1)
    a = torch.rand([M, K], dtype=torch.float16)
    b = torch.rand([K, N], dtype=torch.float16)
    c = tilelang_matmul(a, b)
    torch_c = (a.double() @ b.double())
    torch.testing.assert_close(c.double(), torch_c, rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("M,N,K", SIZES)
def test_gemm_without_swizzle_small_tiles(M, N, K):
    kernel = kernel_matmul_no_l2_opt(M, N, K, 64, 64, 32, "float16", "float", -10)
    tilelang_matmul = tilelang.compile(kernel, out_idx=-1)
    a = torch.rand([M, K], dtype=torch.float16)
    b = torch.rand([K, N], dtype=torch.float16)
    c = tilelang_matmul(a, b)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-2, atol=5e-2)


def test_swizzle_does_not_change_results():
    M, N, K = 200, 136, 72
    a = torch.rand([M, K], dtype=torch.float16)
    b = torch.rand([K, N], dtype=torch.float16)
    outs = [tilelang.compile(kernel_matmul(M, N, K, 64, 64, 32, "float16", "float", ps),
                             out_idx=-1)(a, b) for ps in (0, 2, 10)]
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])
