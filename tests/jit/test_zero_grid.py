"""A grid extent of 0 is an error, as in the reference (its issue 1993): a size that makes a
dynamic grid empty raises at the call, before anything runs (nothing is written), on the
interpreter and on CUDA alike; a grid that is empty whatever the sizes compiles, and every
call of it raises so."""

import pytest
import torch

import tilelang
import tilelang.language as T

DEVICES = ["cpu", pytest.param("cuda", marks=[
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")])]


def _dynamic_grid(blocks_of):
    n = T.dynamic("n")

    @T.prim_func
    def kernel(out: T.Tensor((n,), "float32"), other: T.Tensor((4,), "float32")):
        with T.Kernel(blocks_of(n), threads=32) as pid:
            tx = T.get_thread_binding()
            if tx == 0:
                out[pid] = T.float32(1.0)
            if pid == 0 and tx < 4:
                other[tx] = T.float32(2.0)
    return kernel


@pytest.mark.parametrize("device", DEVICES)
def test_dynamic_grid_of_zero_blocks_raises_before_running(device):
    kernel = tilelang.compile(_dynamic_grid(lambda n: n), target=device if device == "cpu"
                              else "cuda")
    out = torch.zeros(5, device=device)
    other = torch.full((4,), -1.0, device=device)
    kernel(out, other)
    assert out.cpu().tolist() == [1.0] * 5 and other.cpu().tolist() == [2.0] * 4
    empty, other = torch.zeros(0, device=device), torch.full((4,), -1.0, device=device)
    with pytest.raises(ValueError, match="grid extent 0 along x launches no blocks"):
        kernel(empty, other)
    assert other.cpu().tolist() == [-1.0] * 4  # nothing ran


@pytest.mark.parametrize("device", DEVICES)
def test_second_grid_axis_of_zero_raises(device):
    n = T.dynamic("n")

    @T.prim_func
    def kernel(out: T.Tensor((n, 4), "float32")):
        with T.Kernel(4, n, threads=32) as (bx, by):
            if T.get_thread_binding() == 0:
                out[by, bx] = T.float32(bx)

    k = tilelang.compile(kernel, target=device if device == "cpu" else "cuda")
    with pytest.raises(ValueError, match="grid extent 0 along y"):
        k(torch.zeros((0, 4), device=device))


def _static_empty_grid():
    @T.prim_func
    def kernel(out: T.Tensor((4,), "float32")):
        with T.Kernel(T.ceildiv(0, 128), threads=32):
            out[0] = T.float32(1.0)
    return kernel


@pytest.mark.parametrize("device", DEVICES)
def test_grid_empty_whatever_the_sizes_compiles_and_every_call_raises(device):
    # as in the reference: the kernel builds, and each call is refused before anything runs
    kernel = tilelang.compile(_static_empty_grid(), target=device)
    out = torch.zeros(4, device=device)
    with pytest.raises(ValueError, match="grid extent 0 along x launches no blocks"):
        kernel(out)
    assert out.cpu().tolist() == [0.0] * 4


def test_grid_empty_whatever_the_sizes_builds_for_sm90a():
    assert "__global__" in tilelang.compile(_static_empty_grid(),
                                            target="cuda -arch=sm_90a").get_kernel_source()


def test_negative_grid_extent_is_a_located_error():
    with pytest.raises(ValueError, match="grid extent 0 must not be negative, got -1") as info:
        @T.prim_func
        def kernel(out: T.Tensor((4,), "float32")):
            with T.Kernel(-1, threads=32):
                out[0] = T.float32(1.0)
    assert "test_zero_grid.py" in str(info.value)
