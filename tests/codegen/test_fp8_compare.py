"""Comparisons of float8 values: the CUDA fp8 types have no comparison operators, so the
generated code compares them as float (exact: every fp8 value is a float). Same results on
the interpreter and on a GPU (marked gpu)."""

import pytest
import torch

import tilelang
import tilelang.language as T

FP8 = {"float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}


def _compare(dtype):
    @T.prim_func
    def main(A: T.Tensor((256,), dtype), B: T.Tensor((256,), dtype), C: T.Tensor((256,), "int32")):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                j = bx * 128 + i
                C[j] = T.if_then_else(A[j] != 0, 1, 0) + T.if_then_else(A[j] < B[j], 2, 0)

    return main


def _run(dtype, device):
    a = torch.randn(256).to(FP8[dtype])
    a[::3] = 0
    b = torch.randn(256).to(FP8[dtype])
    c = torch.full((256,), -77, dtype=torch.int32)
    kernel = tilelang.compile(_compare(dtype), target="cpu" if device == "cpu" else "cuda")
    args = [x.to(device) for x in (a, b, c)]
    kernel(*args)
    want = (a.float() != 0).int() + 2 * (a.float() < b.float()).int()
    assert torch.equal(args[2].cpu(), want)


@pytest.mark.parametrize("dtype", list(FP8))
def test_fp8_comparisons_build_and_run_on_the_interpreter(dtype):
    src = tilelang.compile(_compare(dtype), target="cuda -arch=sm_90a").get_kernel_source()
    assert "float(A[" in src
    _run(dtype, "cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", list(FP8))
def test_fp8_comparisons_gpu(dtype):
    _run(dtype, "cuda")
