"""Where a tile starts. A slice bound that is a negative constant counts from the end of the
dimension, as in Python (`A[-4:, :]`); a computed bound is taken as written, so a window that
starts before the tensor (`X[by * 2 - 3:by * 2 - 1, :]` in block 0) reads zeros there.
Wrapping a provably negative start but not its stop, as an element index would be, gave such
regions a negative extent (fuzz seeds ew 6206 and 7306). A start point (`T.copy(X[by - 3, 0],
F)`) is a position too: a computed one negative in every block is not counted from the end,
as the same subscript would be as an element index (fuzz seed ew 30409), and a constant
negative one is an error."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.ir.visitor import collect
from tilelang.runtime import toolkit

from device_params import DEVICES, target_of

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")


def shifted_rows(M, N, shift, bm, bn):
    """Z[r, c] = X[r - shift, c + 2] (zero outside X): windows at computed, partly negative
    starts."""

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Z: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=32) as (bx, by):
            T.copy(X[by * bm - shift:by * bm - shift + bm, bx * bn + 2:bx * bn + 2 + bn],
                   Z[by * bm:by * bm + bm, bx * bn:bx * bn + bn])

    return main


def shifted_point(M, N, shift, bn):
    """Z[r, c] = X[r - shift, c] (zero outside X): a tile copied from a start point that is
    negative in the first `shift` blocks of rows."""

    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Z: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), M, threads=32) as (bx, by):
            F = T.alloc_shared((1, bn), "float32")
            T.copy(X[by - shift, bx * bn], F)
            T.copy(F, Z[by, bx * bn])

    return main


def tail_rows(M, N, k):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Z: T.Tensor((k, N), "float32")):
        with T.Kernel(1, threads=32):
            T.copy(X[-k:, :], Z)

    return main


def expected(x, shift):
    M, N = x.shape
    want = torch.zeros_like(x)
    for r in range(M):
        for c in range(N):
            if 0 <= r - shift < M and c + 2 < N:
                want[r, c] = x[r - shift, c + 2]
    return want


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("M,N,shift,bm,bn", [(3, 9, 3, 2, 5), (5, 32, 1, 1, 16),
                                             (37, 100, 5, 8, 32)])
def test_a_window_starting_before_the_tensor_reads_zeros(device, M, N, shift, bm, bn):
    f = shifted_rows(M, N, shift, bm, bn)
    (copy,) = collect(f.body, lambda n: isinstance(n, ir.Copy))
    assert [ir.int_value(e) for e in copy.src.extents] == [bm, bn]
    x = torch.randn(M, N, device=device)
    z = torch.full((M, N), float("nan"), device=device)
    tilelang.compile(f, target=target_of(device))(x, z)
    torch.testing.assert_close(z.cpu(), expected(x.cpu(), shift))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("M,N,shift,bn", [(3, 1, 3, 8), (7, 40, 2, 16)])
def test_a_start_point_before_the_tensor_reads_zeros(device, M, N, shift, bn):
    x = torch.randn(M, N, device=device).half()
    z = torch.full((M, N), float("nan"), device=device)
    tilelang.compile(shifted_point(M, N, shift, bn), target=target_of(device))(x, z)
    want = torch.zeros(M, N)
    want[shift:] = x.cpu().float()[:M - shift]
    torch.testing.assert_close(z.cpu(), want)


def test_a_constant_negative_start_point_is_an_error():
    with pytest.raises(IndexError, match="a tile's start is a position"):
        @T.prim_func
        def main(X: T.Tensor((8, 8), "float32"), Z: T.Tensor((2, 8), "float32")):
            with T.Kernel(1, threads=32):
                F = T.alloc_shared((2, 8), "float32")
                T.copy(X[-2, 0], F)
                T.copy(F, Z)


def test_an_element_index_negative_in_every_block_still_counts_from_the_end():
    @T.prim_func
    def main(X: T.Tensor((4,), "float32"), Z: T.Tensor((4,), "float32")):
        with T.Kernel(4, threads=32) as bx:
            Z[bx] = X[bx - 4]

    x = torch.randn(4)
    z = torch.full((4,), float("nan"))
    tilelang.compile(main, target="cpu")(x, z)
    torch.testing.assert_close(z, x)


def test_a_negative_constant_start_counts_from_the_end():
    x = torch.randn(6, 8)
    z = torch.full((2, 8), float("nan"))
    tilelang.compile(tail_rows(6, 8, 2), target="cpu")(x, z)
    torch.testing.assert_close(z, x[-2:])


@requires_compiler
def test_a_window_starting_before_the_tensor_builds_for_sm90():
    src = tilelang.lower(shifted_rows(3, 9, 3, 2, 5), target="cuda -arch=sm_90a")
    assert "X[" in src
