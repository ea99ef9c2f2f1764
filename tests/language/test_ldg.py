"""`T.__ldg(x[i])`: a global element read through the read-only data cache (`__ldg(&(...))` in
CUDA, a plain load on the interpreter), and its checks."""

import pytest
import torch

import tilelang
import tilelang.language as T
from device_params import HAS_COMPILER, DEVICES


def _kernel(dtype, n, buffer_form=False):
    @T.prim_func
    def main(x: T.Tensor((n,), dtype), y: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            i = bx * 32 + T.get_thread_binding()
            if i < n:
                y[i] = (T.__ldg(x, i) if buffer_form else T.__ldg(x[n - 1 - i])) + 1
    return main


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int8", "int64"])
@pytest.mark.parametrize("buffer_form", [False, True])
def test_reads_the_element(device, dtype, buffer_form):
    n = 77
    kernel = tilelang.compile(_kernel(dtype, n, buffer_form),
                              target="cpu" if device == "cpu" else "cuda")
    x = torch.randint(-50, 50, (n,)).to(getattr(torch, dtype)).to(device)
    y = torch.zeros_like(x) - 3
    kernel(x, y)
    want = (x if buffer_form else x.flip(0)) + 1
    assert torch.equal(y.cpu(), want.cpu())


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8"])
@pytest.mark.parametrize("n", [64, 77])  # 77: the read sits under the tile's bounds guard
@pytest.mark.parametrize("buffer_form", [False, True])
def test_cuda_source_reads_through_ldg(dtype, n, buffer_form):
    kernel = tilelang.compile(_kernel(dtype, n, buffer_form), target="cuda -arch=sm_90a")
    assert "__ldg(&(x[" in kernel.get_kernel_source()


def test_checks():
    with pytest.raises(ValueError, match="x_s is shared") as info:
        @T.prim_func
        def shared(x: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                x_s = T.alloc_shared((32,), "float32")
                x[0] = T.__ldg(x_s[0])
    assert "test_ldg.py" in str(info.value)
    with pytest.raises(ValueError, match="requires an index"):
        @T.prim_func
        def no_index(x: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                x[0] = T.__ldg(x)
