"""Seed 002 (Tilelang Lazy JIT notebook): every cell, kernel code as in the notebook.

Each test runs on the CPU interpreter with small tensors, and on the GPU (marked `gpu`) with
the notebook's own sizes and `device="cuda"`. Cells that only print (`foo`) check the text.
"""

from itertools import product
from typing import Any

import pytest
import torch

import tilelang
import tilelang.language as T

CUDA = torch.cuda.is_available()
DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not CUDA, reason="needs a CUDA GPU")]),
]


def sizes(dev, cpu, gpu):
    return gpu if dev == "cuda" else cpu


# ---- In [2] ------------------------------------------------------------------------------------
@tilelang.lazy_jit
def gemm(
    A: T.Tensor[[int, int], T.float16],
    B: T.Tensor[[int, int], T.float16],
    out_dtype: T.dtype = T.float32,
    block_M: int = 128,
    block_N: int = 128,
    block_K: int = 32,
):
    M, K = A.shape
    K, N = B.shape
    C = T.empty((M, N), out_dtype)
    with T.Kernel(T.ceildiv(M, block_M), T.ceildiv(N, block_N), threads=128) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), A.dtype)
        B_shared = T.alloc_shared((block_K, block_N), B.dtype)
        C_local = T.alloc_fragment((block_M, block_N), out_dtype)
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
            T.copy(A[bx * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, by * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[bx * block_M, by * block_N])
    return C


# ---- In [6] ------------------------------------------------------------------------------------
@T.macro
def gemm_impl(A, B, C, M, N, K, block_M, block_N, block_K):
    with T.Kernel(T.ceildiv(M, block_M), T.ceildiv(N, block_N), threads=128) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), A.dtype)
        B_shared = T.alloc_shared((block_K, block_N), B.dtype)
        C_local = T.alloc_fragment((block_M, block_N), C.dtype)
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
            T.copy(A[bx * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, by * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[bx * block_M, by * block_N])


# ---- In [7] ------------------------------------------------------------------------------------
@tilelang.lazy_jit
def gemm_dyn_K(
    A: T.Tensor[[int, T.dyn["K"]], T.float16],  # noqa: F821
    B: T.Tensor[[T.dyn["K"], int], T.float16],  # noqa: F821
):
    M, K = A.shape
    K, N = B.shape
    C = T.empty((M, N), T.float32)
    gemm_impl(A, B, C, M, N, K, 128, 128, 32)
    return C


# ---- In [10] -----------------------------------------------------------------------------------
@tilelang.lazy_jit
def as_contingious(A: T.StridedTensor[[T.dyn, T.dyn], [T.dyn, T.dyn], Any]):
    M, N = A.shape
    B = T.empty((M, N), A.dtype)
    block_M = 128
    block_N = 128
    with T.Kernel(T.ceildiv(M, block_M), T.ceildiv(N, block_N), threads=128) as (bx, by):
        T.copy(
            A[bx * block_M : (bx + 1) * block_M, by * block_N : (by + 1) * block_N],
            B[bx * block_M : (bx + 1) * block_M, by * block_N : (by + 1) * block_N],
        )
    return B


# ---- In [12] -----------------------------------------------------------------------------------
@tilelang.lazy_jit
def gemm_ptr(
    A: T.ptr,
    B: T.ptr,
    M: int,
    N: int,
    K: int,
):
    A = T.match_buffer(A, (M, K), T.float16)
    B = T.match_buffer(B, (K, N), T.float16)
    C = T.empty((M, N), T.float32)
    gemm_impl(A, B, C, M, N, K, block_M=128, block_N=128, block_K=32)
    return C


# ---- In [14] -----------------------------------------------------------------------------------
@tilelang.lazy_jit
def gemm_ptr_dyn(
    A: T.ptr,
    B: T.ptr,
    M: T.int32,
    N: T.int32,
    K: T.int32,
):
    A = T.match_buffer(A, (M, K), T.float16, strides=(K, 1))
    B = T.match_buffer(B, (K, N), T.float16, strides=(N, 1))
    C = T.empty((M, N), T.float32)
    gemm_impl(A, B, C, M, N, K, block_M=128, block_N=128, block_K=32)
    return C


# ---- In [18] -----------------------------------------------------------------------------------
@tilelang.lazy_jit
def element_wise(
    A: T.Tensor[[T.dyn], Any],
    fn,
):
    (N,) = A.shape
    B = T.empty((N,), dtype=A.dtype)
    block_N = 128
    with T.Kernel(T.ceildiv(N, block_N), threads=128) as bx:
        for i in T.Parallel(block_N):
            idx = bx * block_N + i
            B[idx] = fn(A[idx])
    return B


@T.macro
def add_one(x):
    return x + 1


# ---- In [20] -----------------------------------------------------------------------------------
@T.macro
def n31(x, var: T.Ref):
    if x == 1:
        pass
    elif x % 2 == 0:
        var = var // 2
        n31(x // 2, var)
    else:
        var = var * 3 + 1
        n31(x * 3 + 1, var)


# =================================================================================================


@pytest.mark.parametrize("dev", DEVICES)
def test_cell3_gemm(dev):
    m, k, n = sizes(dev, (256, 64, 128), (1024, 512, 256))
    A = torch.randn(m, k, dtype=torch.float16, device=dev)
    B = torch.randn(k, n, dtype=torch.float16, device=dev)
    C = gemm(A, B)

    # check output is correct
    C_ref = (A.float() @ B.float())
    assert C.dtype == torch.float32 and C.shape == (m, n)
    torch.testing.assert_close(C, C_ref, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dev", DEVICES)
def test_cell4_5_recompile_and_compile(dev):
    m, k, n = sizes(dev, (128, 64, 192), (1024, 512, 1024))
    A = torch.randn(m, k, dtype=torch.float16, device=dev)
    B = torch.randn(k, n, dtype=torch.float16, device=dev)
    before = gemm.trace_count
    C = gemm(A, B, block_M=64, block_N=64)
    torch.testing.assert_close(C, A.float() @ B.float(), rtol=1e-2, atol=1e-2)
    assert gemm.trace_count == before + 1  # new block sizes and shapes: one specialisation

    kernel = gemm.compile(A, B, block_M=64, block_N=64)
    C = kernel(A, B)
    assert isinstance(kernel, tilelang.JITKernel)
    assert gemm.trace_count == before + 1  # compile() found the cached specialisation
    torch.testing.assert_close(C, A.float() @ B.float(), rtol=1e-2, atol=1e-2)


def test_cell8_annot():
    text = repr(gemm_dyn_K.func.annot)
    assert text == ("{'A': TensorAnnot(shape=[A_shape_0$, K$dyn], strides=None, "
                    "dtype=dtype('float16')), 'B': TensorAnnot(shape=[K$dyn, B_shape_1$], "
                    "strides=None, dtype=dtype('float16'))}")


@pytest.mark.parametrize("dev", DEVICES)
def test_cell9_gemm_dyn_K(dev):
    m, k, n = sizes(dev, (128, 96, 256), (1024, 512, 256))
    A = torch.randn(m, k, dtype=torch.float16, device=dev)
    B = torch.randn(k, n, dtype=torch.float16, device=dev)
    C = gemm_dyn_K(A, B)
    C_ref = (A.float() @ B.float())
    torch.testing.assert_close(C, C_ref, rtol=1e-2, atol=1e-2)
    # another K: the same compiled kernel (K is a runtime size)
    traces = gemm_dyn_K.trace_count
    A2 = torch.randn(m, k // 2, dtype=torch.float16, device=dev)
    B2 = torch.randn(k // 2, n, dtype=torch.float16, device=dev)
    torch.testing.assert_close(gemm_dyn_K(A2, B2), A2.float() @ B2.float(), rtol=1e-2,
                               atol=1e-2)
    assert gemm_dyn_K.trace_count == traces


@pytest.mark.parametrize("dev", DEVICES)
def test_cell11_as_contingious(dev):
    n = sizes(dev, 300, 1024)  # 300: the strided view is 150 x 150, a partial last block
    A = torch.randn(n, n, device=dev)
    B = as_contingious(A[::2, ::2])
    B_ref = A[::2, ::2].contiguous()
    torch.testing.assert_close(B, B_ref)


@pytest.mark.parametrize("dev", DEVICES)
def test_cell13_gemm_ptr(dev):
    m, k, n = sizes(dev, (256, 64, 128), (1024, 512, 256))
    A = torch.randn(m, k, dtype=torch.float16, device=dev)
    B = torch.randn(k, n, dtype=torch.float16, device=dev)
    C = gemm_ptr(A, B, m, n, k)
    C_ref = (A.float() @ B.float())
    torch.testing.assert_close(C, C_ref, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dev", DEVICES)
def test_cell15_gemm_ptr_dyn(dev):
    m, k, n = sizes(dev, (256, 64, 128), (1024, 512, 256))
    A = torch.randn(m, k, dtype=torch.float16, device=dev)
    B = torch.randn(k, n, dtype=torch.float16, device=dev)
    C = gemm_ptr_dyn(A, B, m, n, k)
    C_ref = (A.float() @ B.float())
    torch.testing.assert_close(C, C_ref, rtol=1e-2, atol=1e-2)
    traces = gemm_ptr_dyn.trace_count
    A2, B2 = A[:128, :32].contiguous(), B[:32, :].contiguous()
    torch.testing.assert_close(gemm_ptr_dyn(A2, B2, 128, n, 32), A2.float() @ B2.float(),
                               rtol=1e-2, atol=1e-2)
    assert gemm_ptr_dyn.trace_count == traces  # M, N, K are runtime scalars


def test_cell16_par_compile():
    def get_configs():
        return [
            {
                "A": T.Tensor((1024, 1024), T.float32),
                "B": T.Tensor((1024, 1024), T.float32),
                "block_M": block_M,
                "block_N": block_N,
                "block_K": block_K,
            }
            for block_M, block_N, block_K in product([32, 64], repeat=3)
        ]

    kernels = gemm.par_compile(get_configs())
    assert len(kernels) == 8 and all(isinstance(k, tilelang.JITKernel) for k in kernels)
    assert len({id(k) for k in kernels}) == 8
    for kernel, (bm, bn, bk) in zip(kernels, product([32, 64], repeat=3)):
        shared = sorted(str(b.shape) for b in _allocs(kernel.prim_func))
        assert shared == sorted([str((bm, bk)), str((bk, bn)), str((bm, bn))])
        # the placeholder stands for the shape; the annotation's float16 is kept
        assert kernel.prim_func.params[0].dtype == T.float16
        assert kernel.prim_func.params[0].shape == (1024, 1024)


def _allocs(func):
    from tilelang.ir import nodes as ir
    from tilelang.ir.visitor import collect

    return [b for k in collect(func.body, lambda n: isinstance(n, ir.Kernel)) for b in k.allocs]


@pytest.mark.parametrize("dev", DEVICES)
def test_cell17_macro_with_ref(dev):
    @T.macro
    def macro_with_ref(x: T.Ref):
        x = 1  # noqa: F841

    @T.prim_func
    def foo(x: T.Tensor((2,))):
        with T.Kernel(1) as _:
            # 支持常量 index
            macro_with_ref(x[1])

            # 也支持变量 index
            idx = T.alloc_var(T.int32, 0)
            macro_with_ref(x[idx])

    text = str(foo)
    assert "x[1] = 1.0" in text
    assert "T.alloc_var" in text and "x[_tmp] = 1.0" in text
    x = torch.full((2,), 5.0, device=dev)
    tilelang.compile(foo)(x)
    assert x.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("dev", DEVICES)
def test_cell19_element_wise(dev):
    A = torch.randn(sizes(dev, 256, 1024), device=dev)
    B = element_wise(A, add_one)
    B_ref = A + 1
    torch.testing.assert_close(B, B_ref)


@pytest.mark.parametrize("dev", DEVICES)
def test_cell21_collatz(dev):
    @tilelang.lazy_jit
    def foo(A: T.Tensor[[1], T.int32], n: int):
        with T.Kernel(1) as _:
            n31(n, A[0])

    A = torch.tensor([100], dtype=torch.int32, device=dev)
    foo(A, 5)
    assert A.tolist() == [18]


def test_cell22_sincos_print():
    @T.macro
    def sincos(x):
        return T.sin(x), T.cos(x)

    @T.prim_func
    def foo():
        with T.Kernel(32) as x:
            s, c = sincos(x)
            a = s + c  # noqa: F841
            b = s - c  # noqa: F841

    text = str(foo)
    lines = [ln.strip() for ln in text.splitlines()]
    assert any(ln.startswith("s:") and "T.sin(" in ln for ln in lines)
    assert any(ln.startswith("c:") and "T.cos(" in ln for ln in lines)
    assert any(ln.startswith("a:") and ln.endswith("= s + c") for ln in lines)
    assert any(ln.startswith("b:") and ln.endswith("= s - c") for ln in lines)
