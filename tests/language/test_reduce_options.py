"""Keyword options of the tile reductions taken from the reference: `nan_propagate` (max, min,
absmax: a NaN in the input makes the result NaN instead of being skipped), `batch` (a grouping
hint of the reference's cross-thread reduction; validated, same results) and `annotations`.

Kernels run on the CPU interpreter and, where there is one, on the GPU; the CUDA source is built
for sm_90a when a CUDA compiler is installed."""

import math

import pytest
import torch

import tilelang
import tilelang.language as T
from device_params import HAS_COMPILER, DEVICES

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
         "float64": torch.float64}


def _nan_kernel(reduce_fn, dtype, nan_propagate, clear, length=64):
    @T.prim_func
    def kernel(a: T.Tensor((length,), dtype), out: T.Tensor((1,), dtype)):
        with T.Kernel(1, threads=32):
            frag = T.alloc_fragment((length,), dtype)
            acc = T.alloc_fragment((1,), dtype)
            T.copy(a, frag)
            if not clear:
                acc[0] = -1.0
            reduce_fn(frag, acc, clear=clear, nan_propagate=nan_propagate)
            T.copy(acc, out)
    return kernel


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("name", ["reduce_max", "reduce_min", "reduce_absmax"])
@pytest.mark.parametrize("clear", [True, False])
def test_nan_propagate_decides_whether_a_nan_wins(device, dtype, name, clear):
    a = torch.randn(64, dtype=torch.float32).to(TORCH[dtype])
    a[torch.randint(0, 64, ()).item()] = float("nan")
    for nan_propagate in (False, True):
        func = _nan_kernel(getattr(T, name), dtype, nan_propagate, clear)
        kernel = tilelang.compile(func, out_idx=-1, target="cpu" if device == "cpu" else "cuda")
        got = kernel(a.to(device)).float().item()
        assert math.isnan(got) == nan_propagate, (nan_propagate, got)
        if not nan_propagate:
            finite = a[~torch.isnan(a)].float()
            if name == "reduce_absmax":
                finite = finite.abs()
            expect = finite.max() if name != "reduce_min" else finite.min()
            if not clear:
                expect = max(expect, -1.0) if name != "reduce_min" else min(expect, -1.0)
            assert got == float(expect)


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_nan_propagating_reductions_build_for_sm90(dtype):
    src = tilelang.compile(_nan_kernel(T.reduce_max, dtype, True, False), out_idx=-1,
                           target="cuda -arch=sm_90a").get_kernel_source()
    assert "tl::max_nan(" in src
    src = tilelang.compile(_nan_kernel(T.reduce_min, dtype, False, True), out_idx=-1,
                           target="cuda -arch=sm_90a").get_kernel_source()
    assert "min_nan" not in src


def _batched_kernel(op, batch):
    @T.prim_func
    def main(A: T.Tensor((16, 8, 16), "float32"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(8, threads=128) as bx:
            a_s = T.alloc_shared((2, 8, 16), "float32")
            a_f = T.alloc_fragment((2, 8, 16), "float32")
            c_f = T.alloc_fragment((2, 16), "float32")
            T.copy(A[bx * 2, 0, 0], a_s)
            T.copy(a_s, a_f)
            getattr(T, f"reduce_{op}")(a_f, c_f, dim=1, batch=batch, annotations={})
            T.copy(c_f, C[bx * 2, 0])
    return main


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op,batch", [("sum", 2), ("max", 4), ("min", 1), ("abssum", 2)])
def test_batch_keeps_the_results(device, op, batch):
    A = torch.randn(16, 8, 16)
    kernel = tilelang.compile(_batched_kernel(op, batch),
                              target="cpu" if device == "cpu" else "cuda")
    C = torch.full((16, 16), float("nan"), device=device)
    kernel(A.to(device), C)
    expect = {"sum": A.sum(1), "max": A.amax(1), "min": A.amin(1),
              "abssum": A.abs().sum(1)}[op]
    torch.testing.assert_close(C.cpu(), expect, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch", [0, -1, 1.5, True])
def test_batch_must_be_a_positive_int(batch):
    with pytest.raises(ValueError, match="batch must be >= 1 \\(an int\\)") as info:
        _batched_kernel("sum", batch)
    assert "test_reduce_options.py" in str(info.value)


def _finalize_kernel(batch, block_M=64):
    @T.prim_func
    def kernel(A: T.Tensor((block_M, 64), "float32"), B: T.Tensor((block_M,), "float32")):
        with T.Kernel(1, threads=256):
            acc = T.alloc_reducer(block_M, "float32", op="sum", replication="all")
            T.clear(acc)
            a = T.alloc_fragment((block_M, 64), "float32")
            T.copy(A, a)
            for i, j in T.Parallel(block_M, 64):
                acc[i] += a[i, j]
            T.finalize_reducer(acc, batch=batch)
            T.copy(acc, B)
    return kernel


@pytest.mark.parametrize("batch,match", [(0, "batch must be >= 1"), (-1, "batch must be >= 1"),
                                         (128, "exceeds total output elements"),
                                         (3, "must evenly divide")])
def test_finalize_reducer_batch_is_checked(batch, match):
    with pytest.raises(ValueError, match=match) as info:
        _finalize_kernel(batch)
    assert "test_reduce_options.py" in str(info.value)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batch", [1, 4, 64])
def test_finalize_reducer_batches_keep_the_results(device, batch):
    A = torch.randn(64, 64)
    B = torch.zeros(64, device=device)
    tilelang.compile(_finalize_kernel(batch), target="cpu" if device == "cpu" else "cuda")(
        A.to(device), B)
    torch.testing.assert_close(B.cpu(), A.sum(1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("width", [48, 96])
def test_non_power_of_two_reduction_widths_are_located(width):
    @T.prim_func
    def kernel(A: T.Tensor((1, width), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=width):
            src = T.alloc_fragment((1, width), "float32")
            dst = T.alloc_fragment((1,), "float32")
            T.copy(A, src)
            T.reduce_sum(src, dst, dim=1)
            T.copy(dst, B)

    with pytest.raises(ValueError, match="logical_width = .* positive power of two") as info:
        tilelang.lower(kernel, target="cuda -arch=sm_90a")
    assert "test_reduce_options.py" in str(info.value)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["sum", "max", "min", "absmax"])
def test_thread_local_reduction_into_a_variable(device, op):
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=4):
            tx = T.get_thread_binding()
            src = T.alloc_local((8,), "float32")
            dst = T.alloc_var("float32")
            for i in T.serial(8):
                src[i] = A[tx, i]
            getattr(T, f"reduce_{op}")(src, dst, dim=0)
            B[tx] = dst

    a = torch.randn(4, 8)
    b = torch.zeros(4, device=device)
    tilelang.compile(main, target="cpu" if device == "cpu" else "cuda")(a.to(device), b)
    expect = {"sum": a.sum(1), "max": a.amax(1), "min": a.amin(1), "absmax": a.abs().amax(1)}
    torch.testing.assert_close(b.cpu(), expect[op], rtol=1e-5, atol=1e-5)
    if device == "cpu" and HAS_COMPILER:
        tilelang.compile(main, target="cuda -arch=sm_90a")
