"""Seed 001 (learner's notes on the programming model) on the CPU interpreter.

The notes show their programs as images and short excerpts; these tests write them the way
the notes describe: a vector add with `T.Buffer` parameters and `T.Parallel`, a block copying
a 128x128 tile into a fragment with `T.copy` (and by hand with `T.Parallel`), shared memory,
the copy rule for a src region smaller than dst (the dst-shaped window from the src start is
read), and the tiled GEMM accumulating into a cleared fragment.
"""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.transform.uninitialized_reads import UninitializedReadWarning


@tilelang.jit(out_idx=[2])
def vector_add(N, block_N=128, dtype="float32"):
    @T.prim_func
    def vadd(A: T.Buffer((N,), dtype), B: T.Buffer((N,), dtype), C: T.Buffer((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), threads=block_N) as bx:
            for i in T.Parallel(block_N):
                C[bx * block_N + i] = A[bx * block_N + i] + B[bx * block_N + i]

    return vadd


@pytest.mark.parametrize("N", [1024, 1000, 77])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_vector_add(N, dtype):
    tdt = getattr(torch, dtype)
    a, b = torch.randn(N, dtype=tdt), torch.randn(N, dtype=tdt)
    c = vector_add(N, 128, dtype)(a, b)
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)


@tilelang.jit(out_idx=[1, 2])
def tile_copies():
    @T.prim_func
    def main(A: T.Buffer((1024, 1024), "float16"), B: T.Buffer((128, 128), "float16"),
             C: T.Buffer((128, 32), "float16")):
        with T.Kernel(1, 1, threads=32) as (bx, by):
            A_frag = T.alloc_fragment((128, 128), "float16")
            A_tile = A[0:128, 0:128]
            T.copy(A_tile, A_frag)
            for i, j in T.Parallel(128, 128):
                A_frag[i, j] = A_frag[i, j] + A[i, j]
            T.copy(A_frag, B)
            # 128x32 shared tile, filled through a 128x8 region: dst is the base, so the
            # 128x32 window starting at A[0, 100] is read
            A_shared = T.alloc_shared((128, 32), "float16")
            T.copy(A[0:128, 100:108], A_shared)
            T.copy(A_shared, C)

    return main


def test_fragment_and_shared_copies():
    a = torch.randn(1024, 1024, dtype=torch.float16)
    b, c = tile_copies()(a)
    assert torch.equal(b, a[:128, :128] + a[:128, :128])
    assert torch.equal(c, a[:128, 100:132])


@tilelang.jit(out_idx=[2])
def gemm(M, N, K, block_M=64, block_N=64, block_K=32, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def main(A: T.Buffer((M, K), dtype), B: T.Buffer((K, N), dtype), C: T.Buffer((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


@pytest.mark.parametrize("M,N,K", [(256, 192, 128), (200, 136, 72)])
def test_gemm_from_the_notes(M, N, K):
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    c = gemm(M, N, K)(a, b)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-2, atol=1e-2)


@tilelang.jit(out_idx=[2])
def gemm_without_clear(M, N, K, block_M=64, block_N=64, block_K=32):
    # the notes' first attempt forgot T.clear: the fragment starts with garbage
    @T.prim_func
    def main(A: T.Buffer((M, K), "float16"), B: T.Buffer((K, N), "float16"),
             C: T.Buffer((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), "float16")
            B_shared = T.alloc_shared((block_K, block_N), "float16")
            acc = T.alloc_fragment((block_M, block_N), "float")
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


def test_forgotten_clear_shows_as_nan():
    a, b = torch.randn(64, 32, dtype=torch.float16), torch.randn(32, 64, dtype=torch.float16)
    with pytest.warns(UninitializedReadWarning, match="T.gemm adds to `acc`"):
        kernel = gemm_without_clear(64, 64, 32)  # and says so when it compiles
    c = kernel(a, b)
    assert torch.isnan(c).all()
