"""`T.gemm` on the CUDA cores (`tl::gemm_fma_ss`): float64 operands on every GPU, and every
dtype on GPUs before sm_80 (no m16n8k16 mma there). Same accumulator layout as mma.sync."""

import pytest
import torch

import tilelang
import tilelang.language as T

SM75 = {"kind": "cuda", "arch": "sm_75"}
SM90 = "cuda -arch=sm_90a"


def matmul(M, N, K, bm, bn, bk, dtype, accum, trans_b=False, threads=128, a_in_registers=False):
    b_shape = (N, K) if trans_b else (K, N)
    b_tile = (bn, bk) if trans_b else (bk, bn)

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_fragment((bm, bk), dtype) if a_in_registers else \
                T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared(b_tile, dtype)
            C_l = T.alloc_fragment((bm, bn), accum)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                if trans_b:
                    T.copy(B[bx * bn, k * bk], B_s)
                else:
                    T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=trans_b)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


def source(prog, target):
    return tilelang.lower(prog, target=target)


def test_float64_uses_the_cuda_cores_and_others_keep_mma():
    assert "tl::gemm_fma_ss<" in source(matmul(128, 128, 64, 64, 32, 16, T.float64, T.float64,
                                               trans_b=True), SM90)
    src = source(matmul(128, 128, 64, 64, 64, 32, T.float16, T.float32), "cuda -arch=sm_80")
    assert "tl::gemm_ss<" in src and "gemm_fma" not in src


@pytest.mark.parametrize("dtype,accum", [(T.float16, T.float32), (T.float16, T.float16),
                                         (T.bfloat16, T.float32), (T.float32, T.float32),
                                         (T.float64, T.float64), (T.int8, T.int32)])
def test_every_dtype_builds_for_sm75(dtype, accum):
    tile = (32, 32, 16) if dtype == T.float64 else (64, 64, 32)  # sm_75 has 48 KB of smem
    kernel = tilelang.compile(matmul(128, 128, 64, *tile, dtype, accum), target=SM75)
    assert "tl::gemm_fma_ss<" in kernel.get_kernel_source()


def test_float64_builds_for_sm90_with_a_transposed_b():
    kernel = tilelang.compile(matmul(512, 512, 512, 64, 32, 16, T.float64, T.float64,
                                     trans_b=True), target=SM90)
    assert "tl::gemm_fma_ss<64, 32, 16," in kernel.get_kernel_source()


def test_float64_gemm_on_the_interpreter():
    M, N, K = 96, 64, 48
    kernel = tilelang.compile(matmul(M, N, K, 32, 32, 16, T.float64, T.float64, trans_b=True),
                              target="cpu")
    a = torch.randn(M, K, dtype=torch.float64)
    b = torch.randn(N, K, dtype=torch.float64)
    c = torch.full((M, N), float("nan"), dtype=torch.float64)
    kernel(a, b, c)
    torch.testing.assert_close(c, a @ b.T, rtol=1e-12, atol=1e-12)


def test_register_operands_are_refused_with_the_reason():
    with pytest.raises(NotImplementedError, match="takes A and B from shared memory") as info:
        tilelang.compile(matmul(64, 64, 32, 64, 64, 32, T.float64, T.float64,
                                a_in_registers=True), target=SM90)
    assert "test_gemm_fma.py" in str(info.value)


def test_unsupported_combinations_are_refused():
    with pytest.raises(TypeError, match="not a gemm the language defines"):
        matmul(64, 64, 32, 64, 64, 32, T.float64, T.float32)
    with pytest.raises(ValueError, match="not supported on the CUDA cores"):  # no fp8 FMA
        tilelang.compile(matmul(64, 64, 32, 64, 64, 32, T.float8_e4m3, T.float32), target=SM75)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("shape", [(512, 512, 512), (200, 136, 72)])
def test_float64_gemm_on_the_gpu(trans_b, shape):
    M, N, K = shape
    kernel = tilelang.compile(matmul(M, N, K, 64, 32, 16, T.float64, T.float64, trans_b=trans_b),
                              target="cuda")
    a = torch.randn(M, K, dtype=torch.float64, device="cuda")
    b = torch.randn(*((N, K) if trans_b else (K, N)), dtype=torch.float64, device="cuda")
    c = torch.full((M, N), float("nan"), dtype=torch.float64, device="cuda")
    kernel(a, b, c)
    torch.testing.assert_close(c, a @ (b.T if trans_b else b), rtol=1e-10, atol=1e-10)


def test_float64_register_operand_is_refused_for_both_targets():
    """The CUDA-core gemm reads both operands from shared memory; the interpreter refuses the
    same program (one rule, at the user's line, while tracing)."""
    import pytest as _pytest
    from tilelang.errors import KernelError
    import tilelang.language as T

    with _pytest.raises(KernelError, match="float64 operands takes A and B from shared") as e:
        @T.prim_func
        def f(A: T.Tensor((32, 32), "float64"), B: T.Tensor((32, 32), "float64"),
              C: T.Tensor((32, 32), "float64")):
            with T.Kernel(1, threads=128):
                A_f = T.alloc_fragment((32, 32), "float64")
                B_s = T.alloc_shared((32, 32), "float64")
                C_f = T.alloc_fragment((32, 32), "float64")
                T.copy(A, A_f)
                T.copy(B, B_s)
                T.clear(C_f)
                T.gemm(A_f, B_s, C_f)
                T.copy(C_f, C)
    assert "test_gemm_fma.py" in str(e.value)
