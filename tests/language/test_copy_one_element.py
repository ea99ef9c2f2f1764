"""T.copy of one element to one element (`T.copy(A[i, j], B[i, j])`) is an assignment, allowed
inside T.Parallel as in the reference, converting to the destination's dtype and reading the
T.annotate_safe_value value outside the source tensor. Interpreter against torch and the
sm_90a build; the GPU run is tests/gpu/test_copy_one_element_gpu.py."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError
from tilelang.runtime import compile_cuda, toolkit


def parallel_element_copy(M, N, padded_M, padded_N, src=T.float32, dst=T.float32,
                          pad=None):
    @T.prim_func
    def main(A: T.Tensor((M, N), src), B: T.Tensor((padded_M, padded_N), dst)):
        with T.Kernel(T.ceildiv(padded_N, 32), T.ceildiv(padded_M, 32), threads=128) as (bx, by):
            if pad is not None:
                T.annotate_safe_value({A: pad})
            for i, j in T.Parallel(32, 32):
                T.copy(A[by * 32 + i, bx * 32 + j], B[by * 32 + i, bx * 32 + j])

    return main


def _expected(a, padded_M, padded_N, dtype, pad):
    ref = torch.full((padded_M, padded_N), 0 if pad is None else pad, dtype=dtype)
    ref[:a.shape[0], :a.shape[1]] = a.to(dtype)
    return ref


@pytest.mark.parametrize("M,N,src,dst,pad", [
    (64, 96, T.float32, T.float32, None), (70, 75, T.float32, T.float32, -99),
    (45, 33, T.float32, T.float16, -7), (64, 64, T.float16, T.bfloat16, None),
    (50, 40, T.float16, T.float32, None)])
def test_interpreter(M, N, src, dst, pad):
    padded_M, padded_N = -(-M // 32) * 32, -(-N // 32) * 32
    a = torch.randn(M, N).to(getattr(torch, src))
    b = torch.full((padded_M, padded_N), float("nan")).to(getattr(torch, dst))
    tilelang.compile(parallel_element_copy(M, N, padded_M, padded_N, src, dst, pad),
                     target="cpu")(a, b)
    torch.testing.assert_close(b, _expected(a, padded_M, padded_N, getattr(torch, dst), pad))


def test_a_tile_copy_in_a_parallel_loop_is_still_rejected():
    with pytest.raises(KernelError, match="Only elementwise operations"):
        @T.prim_func
        def main(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64, 64), T.float32)):
            with T.Kernel(1, threads=128):
                for i, j in T.Parallel(2, 2):
                    T.copy(A[i * 32:i * 32 + 32, j], B[i * 32:i * 32 + 32, j])


@pytest.mark.skipif(toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
                    reason="no CUDA compiler (NVRTC or nvcc) installed")
def test_builds_for_sm90a():
    src = tilelang.lower(parallel_element_copy(70, 75, 96, 96, pad=-99),
                         target="cuda -arch=sm_90a")
    assert "-99" in src
    compile_cuda(src, "sm_90a")


@pytest.mark.skipif(toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
                    reason="no CUDA compiler (NVRTC or nvcc) installed")
@pytest.mark.parametrize("src_dtype,dst_dtype", [(T.float16, T.float32), (T.float32, T.float16),
                                                 (T.float16, T.bfloat16)])
def test_converting_copies_build_for_sm90a(src_dtype, dst_dtype):
    # the cast loop's indices name other loop variables (pair_conversions once asked a
    # symbolic equality for a Python bool there)
    src = tilelang.lower(parallel_element_copy(50, 40, 64, 64, src_dtype, dst_dtype),
                         target="cuda -arch=sm_90a")
    compile_cuda(src, "sm_90a")
