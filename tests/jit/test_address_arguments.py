"""A `T.ptr` parameter given its shape by `T.make_tensor` takes a tensor or the address itself
(`t.data_ptr()`, as the reference's cython backend does): the kernel then uses the memory at
that address with the declared shape and dtype, its sizes coming from the scalar arguments."""

import pytest
import torch

import tilelang
import tilelang.language as T
from device_params import DEVICES, target_of


def _scale_rows():
    @T.prim_func
    def main(x_ptr: T.ptr, y_ptr: T.ptr, m: T.int32, n: T.int32):
        X = T.make_tensor(x_ptr, (m, n), "float16")
        Y = T.make_tensor(y_ptr, (m, n), "float32")
        with T.Kernel(T.ceildiv(m, 32), threads=128) as bx:
            for i, j in T.Parallel(32, n):
                Y[bx * 32 + i, j] = T.cast(X[bx * 32 + i, j], "float32") * (j + 1)
    return main


@pytest.mark.parametrize("device", DEVICES)
def test_addresses_and_tensors_give_the_same_result(device):
    m, n = 70, 24  # a ragged last block of rows
    kernel = tilelang.compile(_scale_rows(), target=target_of(device))
    x = torch.randn(m, n, dtype=torch.float16, device=device)
    by_address = torch.full((m, n), float("nan"), device=device)
    by_tensor = torch.full((m, n), float("nan"), device=device)
    kernel(x.data_ptr(), by_address.data_ptr(), m, n)
    kernel(x, by_tensor, m, n)
    expect = x.float() * torch.arange(1, n + 1, device=device)
    torch.testing.assert_close(by_address, expect)
    torch.testing.assert_close(by_tensor, expect)


def test_null_address_is_an_error():
    kernel = tilelang.compile(_scale_rows(), target="cpu")
    y = torch.zeros(4, 8)
    with pytest.raises(ValueError, match="'x_ptr': got the null address 0"):
        kernel(0, y, 4, 8)


def test_an_address_for_a_plain_tensor_parameter_is_refused():
    @T.prim_func
    def main(X: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=8) as _:
            tx = T.get_thread_binding()
            X[tx] = 1.0

    kernel = tilelang.compile(main, target="cpu")
    with pytest.raises(TypeError, match="'X': expects a torch.Tensor"):
        kernel(torch.zeros(8).data_ptr())


def test_address_parameters_build_for_sm90():
    src = tilelang.compile(_scale_rows(), target="cuda -arch=sm_90a").get_kernel_source()
    assert "__global__" in src and "x_ptr" in src and "y_ptr" in src
