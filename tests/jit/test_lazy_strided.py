"""T.StridedTensor: strided views are passed without a copy and indexed with their strides."""

import torch

import tilelang
import tilelang.language as T


@tilelang.lazy_jit
def transpose_copy(A: T.StridedTensor[[T.dyn, T.dyn], [T.dyn, T.dyn], T.float32]):
    M, N = A.shape
    B = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M, 16), threads=64) as bx:
        for i, j in T.Parallel(16, N):
            B[bx * 16 + i, j] = A[bx * 16 + i, j]
    return B


@tilelang.lazy_jit
def scale_cols(A: T.StridedTensor[[int, int], [int, int], T.float32], s: T.float32):
    M, N = A.shape
    with T.Kernel(1, threads=32) as _:
        for i, j in T.Parallel(M, N):
            A[i, j] = A[i, j] * s


def test_views_one_kernel_for_all_strides():
    base = torch.randn(48, 40)
    for view in (base[::2, ::2], base.t(), base[3:35, 1:33:3], base):
        torch.testing.assert_close(transpose_copy(view), view.contiguous())
    assert transpose_copy.trace_count == 1


def test_writes_through_a_view_and_int_strides_key():
    base = torch.randn(8, 12)
    expect = base.clone()
    view = base[:, ::3]  # (8, 4), strides (12, 3): writes land in base
    scale_cols(view, 2.0)
    expect[:, ::3] *= 2.0
    torch.testing.assert_close(base, expect)
    assert scale_cols.trace_count == 1
    view2 = base[:, 1::3]
    scale_cols(view2, -1.0)  # same shape and strides: cached
    expect[:, 1::3] *= -1.0
    torch.testing.assert_close(base, expect)
    assert scale_cols.trace_count == 1
    scale_cols(base[:, ::2][:, :4], 3.0)  # strides (12, 2): recompiled
    expect[:, 0:8:2] *= 3.0
    torch.testing.assert_close(base, expect)
    assert scale_cols.trace_count == 2
    tir = str(scale_cols.get_tir(base[:, ::3], 1.0))
    assert "strides=(12, 3)" in tir
