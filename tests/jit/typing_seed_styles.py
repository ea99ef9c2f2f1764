"""A user's file in every annotation style of the seed documents, type-checked by
test_typing.py with pyright and mypy at their default settings. A line that a checker flags
ends with `# expect:` and the rule (pyright) or error code (mypy) it reports; every other line
must check clean. docs/lazy_jit.md ("Type checkers") describes the same results. Not a test
module, and never run: it only has to be what a user would write."""

from typing import Any

import torch

import tilelang
import tilelang.language as T

M, N, K = 1024, 1024, 512
dtype = "float16"


# seeds 000, 003, 004: the reference's factory style, call form in the annotations. mypy does
# not check the body of an unannotated function (the factory), so only pyright sees these.
@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def main(
            A: T.Tensor((M, K), dtype),  # expect: pyright=reportInvalidTypeForm
            B: T.Tensor((K, N), dtype),  # expect: pyright=reportInvalidTypeForm
            C: T.Tensor((M, N), dtype),  # expect: pyright=reportInvalidTypeForm
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return main


# seed 001: T.Buffer, the same call form, in a function at module level: both checkers see it
@T.prim_func
def vector_add(A: T.Buffer((1024,), "float16"),  # expect: pyright=reportInvalidTypeForm mypy=valid-type
               B: T.Buffer((1024,), "float16"),  # expect: pyright=reportInvalidTypeForm mypy=valid-type
               C: T.Buffer((1024,), "float16")):  # expect: pyright=reportInvalidTypeForm mypy=valid-type
    with T.Kernel(8, threads=128) as bx:
        for i in T.Parallel(128):
            C[bx * 128 + i] = A[bx * 128 + i] + B[bx * 128 + i]


# seed 002: the lazy JIT's subscript forms
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


@tilelang.lazy_jit
def gemm_dyn_K(
    A: T.Tensor[[int, T.dyn["K"]], T.float16],
    B: T.Tensor[[T.dyn["K"], int], T.float16],
):
    M, K = A.shape
    K, N = B.shape
    return T.empty((M, N), T.float32)


# sizes in variables and literal sizes: fine for pyright, not types for mypy
@tilelang.lazy_jit
def scale(A: T.Tensor[(M, K), dtype],  # expect: mypy=syntax mypy=valid-type
          B: T.Tensor[[128, T.dyn], T.float16]):  # expect: mypy=valid-type
    return A


@tilelang.lazy_jit
def as_contiguous(A: T.StridedTensor[[T.dyn, T.dyn], [T.dyn, T.dyn], Any]):
    M, N = A.shape
    B = T.empty((M, N), A.dtype)
    with T.Kernel(T.ceildiv(M, 128), T.ceildiv(N, 128), threads=128) as (bx, by):
        T.copy(A[bx * 128:(bx + 1) * 128, by * 128:(by + 1) * 128],
               B[bx * 128:(bx + 1) * 128, by * 128:(by + 1) * 128])
    return B


@tilelang.lazy_jit
def gemm_ptr_dyn(A: T.ptr, B: T.ptr, M: T.int32, N: T.int32, K: T.int32):
    A = T.match_buffer(A, (M, K), T.float16, strides=(K, 1))
    B = T.match_buffer(B, (K, N), T.float16, strides=(N, 1))
    return T.empty((M, N), T.float32)


# the newer style: annotation statements on the parameters, in an unannotated function (mypy
# leaves its body alone, pyright reports the redeclaration and the call form)
@tilelang.jit
def matmul_new(A, B, block_M, block_N, block_K, dtype=T.float16):  # expect: pyright=reportRedeclaration pyright=reportRedeclaration
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)  # expect: pyright=reportInvalidTypeForm
    B: T.Tensor((K, N), dtype)  # expect: pyright=reportInvalidTypeForm
    C = T.empty((M, N), dtype)
    return C


def use() -> None:
    a = torch.randn(1024, 512, dtype=torch.float16)
    b = torch.randn(512, 1024, dtype=torch.float16)
    kernel = matmul(M, N, K, 128, 128, 32)
    print(kernel(a, b), kernel.get_kernel_source(), tilelang.compile(vector_add).get_tir())
    print(gemm(a, b), gemm.compile(a, b, block_M=64), gemm.get_tir(a, b), gemm.func.annot)
    print(gemm_dyn_K(a, b), as_contiguous(a[::2, ::2]), gemm_ptr_dyn(a, b, 1024, 1024, 512))
    print(matmul_new.compile(M=1024, N=1024, K=512, block_M=128, block_N=128, block_K=32))
    kernels = gemm.par_compile([{"A": T.Tensor((1024, 512), T.float16),
                                 "B": T.Tensor((512, 1024), T.float16), "block_M": 64}])
    print(kernels[0], scale(a, a))
