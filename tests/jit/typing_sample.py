"""Checked by test_typing.py with pyright and mypy: the type-checker-friendly spellings of
lazy-JIT signatures must produce no errors. Not a test module itself."""

from typing import Any

import torch

import tilelang
import tilelang.language as T


@tilelang.lazy_jit
def gemm(
    A: T.Tensor[[int, int], T.float16],
    B: T.Tensor[[int, T.dyn], T.float16],
    out_dtype: T.dtype = T.float32,
    block_M: int = 64,
    block_N: int = 64,
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


@tilelang.lazy_jit
def contiguous(A: T.StridedTensor[[T.dyn, T.dyn], [T.dyn, T.dyn], Any], n: T.int32):
    M, N = A.shape
    B = T.empty((M, N), A.dtype)
    with T.Kernel(T.ceildiv(M, 32), threads=128) as bx:
        for i, j in T.Parallel(32, N):
            B[bx * 32 + i, j] = A[bx * 32 + i, j] + n
    return B


@T.macro
def bump(x: T.Ref, by: float):
    x = x + by


def run() -> None:
    a = torch.randn(64, 32, dtype=torch.float16)
    b = torch.randn(32, 64, dtype=torch.float16)
    c = gemm(a, b, block_M=32)
    kernel = gemm.compile(a, b, block_M=32)
    c2 = kernel(a, b)
    print(c, c2, gemm.get_tir(a, b), gemm.func.annot)
    kernels = gemm.par_compile([{"A": T.Tensor((64, 64), T.float16),
                                 "B": T.Tensor((64, 64), T.float16), "block_M": 32}])
    print(kernels[0], contiguous(torch.randn(8, 8)[::2], 3))
