"""T.copy into and out of thread-private (`T.alloc_local`) buffers whose region depends on the
thread (each thread copies its own row): the interpreter runs them thread by thread, as the
GPU does."""

import torch

import tilelang
import tilelang.language as T
from tilelang.runtime import compile_cuda, toolkit


def _row_kernel(rows, cols):
    @T.prim_func
    def k(A: T.Tensor((rows, cols), "float32"), B: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1, threads=(rows, 2)):
            r = T.get_thread_binding(0)
            h = T.get_thread_binding(1)
            half = cols // 2
            row = T.alloc_local((half,), "float32")
            T.copy(A[r, h * half:(h + 1) * half], row)
            for i in T.serial(half):
                row[i] = row[i] * 2.0 + r
            T.copy(row, B[r, h * half:(h + 1) * half])
    return k


def test_per_thread_rows_round_trip():
    rows, cols = 8, 12
    a = torch.randn(rows, cols)
    b = torch.full((rows, cols), float("nan"))
    tilelang.compile(_row_kernel(rows, cols), target="cpu")(a, b)
    torch.testing.assert_close(b, a * 2 + torch.arange(rows)[:, None].float())
    src = tilelang.lower(_row_kernel(rows, cols), target="cuda -arch=sm_90a")
    if toolkit.nvrtc_backend() is not None or toolkit.nvcc_path() is not None:
        compile_cuda(src, "sm_90a")


def test_float8_comparisons_build():
    @T.prim_func
    def k(A: T.Tensor((32,), "float8_e5m2"), B: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            B[tx] = T.if_then_else(A[tx] != T.cast(0, "float8_e5m2"), 1, 0)

    src = tilelang.lower(k, target="cuda -arch=sm_90a")
    assert "(float)A[tx] != (float)" in src
    if toolkit.nvrtc_backend() is not None or toolkit.nvcc_path() is not None:
        compile_cuda(src, "sm_90a")
    a = torch.tensor([0.0, 1.5, -2.0, 0.0] * 8).to(torch.float8_e5m2)
    b = torch.zeros(32, dtype=torch.int32)
    tilelang.compile(k, target="cpu")(a, b)
    assert b.tolist() == [0, 1, 1, 0] * 8
