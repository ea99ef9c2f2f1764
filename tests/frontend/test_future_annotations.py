"""Kernels in a module with postponed annotations (`from __future__ import annotations`): every
annotation is a string, evaluated where the kernel was defined (frontend/annotations.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T


def scaled_copy(M, N, block_M, factor):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        # N appears only in the annotations: not a closure cell of `main`
        with T.Kernel(T.ceildiv(M, block_M), threads=32) as bx:
            for i, j in T.Parallel(block_M, 16):
                B[bx * block_M + i, j] = A[bx * block_M + i, j] * factor

    return main


def row_sums(M, N, dtype="float32"):
    @T.macro
    def add_rows(tile: T.FragmentBuffer, out: T.SharedBuffer):
        T.reduce_sum(tile, out, dim=1)

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), S: T.Tensor((M,), dtype)):
        with T.Kernel(1, threads=32):
            tile = T.alloc_fragment((M, N), dtype)
            sums = T.alloc_shared((M,), dtype)
            T.copy(A, tile)
            add_rows(tile, sums)
            T.copy(sums, S)

    return main


def test_prim_func_annotation_names_from_the_factory():
    M, N = 37, 16
    kernel = tilelang.compile(scaled_copy(M, N, 8, 3.0), out_idx=[1], target="cpu")
    a = torch.randn(M, N)
    torch.testing.assert_close(kernel(a), a * 3.0)


def test_macro_annotations_and_decorator_with_arguments():
    kernel = tilelang.compile(row_sums(8, 12), out_idx=[1], target="cpu")
    a = torch.randn(8, 12)
    np.testing.assert_allclose(kernel(a).numpy(), a.double().sum(1).numpy(), rtol=1e-5)


def test_unresolvable_annotation_is_a_located_error():
    with pytest.raises(TypeError, match="parameter 'A'.*needs an annotation") as info:
        @T.prim_func
        def main(A: T.Tensor((UNDEFINED_NAME, 4), "float32")):  # noqa: F821
            with T.Kernel(1, threads=32):
                pass
    assert "test_future_annotations.py" in str(info.value)
