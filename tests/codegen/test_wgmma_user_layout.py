"""A shared gemm operand whose T.annotate_layout is the swizzle wgmma reads
(`make_swizzled_layout`) stays on wgmma (sm_90a), so two gemms into one accumulator, one of them
on such an operand, agree on its layout (the gdn chunk_o_bwd example), and so does a
hand-written index map equal to it (layout/swizzle.py recognised_swizzle); any other user layout
keeps the mma.sync path."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.layout import Layout, make_swizzled_layout


def two_gemms(M, N, K, annotate, threads=128, first=True):
    """C = A1 @ B1^T + A2 @ B2 (B2 K x N; without the first term unless `first`), one block
    per 64-row slab; `annotate` gives B2 a user layout: "swizzled" (wgmma's own) or
    "row_major"."""

    @T.prim_func
    def kernel(A1: T.Tensor((M, K), "float16"), B1: T.Tensor((N, K), "float16"),
               A2: T.Tensor((M, K), "float16"), B2: T.Tensor((K, N), "float16"),
               C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, 64), threads=threads) as bm:
            a1 = T.alloc_shared((64, K), "float16")
            b1 = T.alloc_shared((N, K), "float16")
            a2 = T.alloc_shared((64, K), "float16")
            b2 = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((64, N), "float32")
            if annotate == "swizzled":
                T.annotate_layout({b2: make_swizzled_layout(b2)})
            elif annotate == "row_major":
                T.annotate_layout({b2: make_swizzled_layout(b2, mode=0)})
            T.copy(A1[bm * 64, 0], a1)
            T.copy(B1, b1)
            T.copy(A2[bm * 64, 0], a2)
            T.copy(B2, b2)
            T.clear(acc)
            if first:
                T.gemm(a1, b1, acc, transpose_B=True)
            T.gemm(a2, b2, acc)
            T.copy(acc, C[bm * 64, 0])
    return kernel


def _gemm_templates(func):
    src = tilelang.lower(func, target="cuda -arch=sm_90a")
    return re.findall(r"tl::(\w*gemm_ss)<", src)


def test_wgmma_layout_annotation_keeps_both_gemms_on_wgmma():
    assert _gemm_templates(two_gemms(128, 64, 64, "swizzled")) == ["wgmma_gemm_ss"] * 2
    assert _gemm_templates(two_gemms(128, 64, 64, None)) == ["wgmma_gemm_ss"] * 2


def test_another_user_layout_keeps_mma_sync():
    assert _gemm_templates(two_gemms(128, 64, 64, "row_major", first=False)) == ["gemm_ss"]


def _inputs(M, N, K, device="cpu"):
    g = [torch.randn(s, device=device).half() for s in ((M, K), (N, K), (M, K), (K, N))]
    return g + [torch.full((M, N), float("nan"), device=device)]


def _expected(a1, b1, a2, b2):
    return a1.float() @ b1.float().T + a2.float() @ b2.float()


def swizzle128_map(rows, cols):
    """A user's map of the 128-byte swizzle of a float16 tile: 64-column blocks stored one
    after the other, 16-byte chunk c of row i at chunk c ^ (i % 8)."""
    return lambda i, j: (j % 8) + ((i % 8) ^ ((j // 8) % 8)) * 8 + i * 64 + (j // 64) * rows * 64


def hand_swizzled_gemm(M, N, K, bk=128, stages=2):
    """C = A @ B^T, both operand tiles laid out by hand-written swizzle maps, pipelined."""

    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"),
               C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
            a = T.alloc_shared((64, bk), "float16")
            b = T.alloc_shared((64, bk), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.annotate_layout({a: Layout((64, bk), swizzle128_map(64, bk)),
                               b: Layout((64, bk), swizzle128_map(64, bk))})
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * 64, k * bk], a)
                T.copy(B[bx * 64, k * bk], b)
                T.gemm(a, b, acc, transpose_B=True)
            T.copy(acc, C[by * 64, bx * 64])
    return kernel


def test_hand_written_swizzle_operands_are_wgmma_and_mma_operands():
    sm90 = tilelang.lower(hand_swizzled_gemm(128, 128, 256), target="cuda -arch=sm_90a")
    # both operands 64 x 128 tiles with the 128-byte swizzle; loaded by swizzled TMA boxes
    assert re.search(r"tl::wgmma_gemm_ss<64, 64, 128, 1, 1, false, true, 64, 128, 128, "
                     r"64, 128, 128, ", sm90), sm90
    assert "tl::tma_load(" in sm90
    sm80 = tilelang.lower(hand_swizzled_gemm(128, 128, 256), target="cuda -arch=sm_80")
    assert re.search(r"tl::gemm_ss<64, 64, 128, \d+, \d+, false, true, 64, 128, 128, "
                     r"64, 128, 128>", sm80), sm80


def test_hand_written_swizzle_interpreter():
    a, b = torch.randn(96, 320).half(), torch.randn(80, 320).half()
    c = torch.full((96, 80), float("nan"))
    tilelang.compile(hand_swizzled_gemm(96, 80, 320), target="cpu")(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float().T, rtol=1e-3, atol=1e-2)


def test_interpreter():
    a1, b1, a2, b2, c = _inputs(128, 64, 64)
    tilelang.compile(two_gemms(128, 64, 64, "swizzled"), target="cpu")(a1, b1, a2, b2, c)
    torch.testing.assert_close(c, _expected(a1, b1, a2, b2), rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("M", [64, 192])
def test_on_the_gpu(M):
    a1, b1, a2, b2, c = _inputs(M, 64, 64, "cuda")
    tilelang.compile(two_gemms(M, 64, 64, "swizzled"), target="cuda")(a1, b1, a2, b2, c)
    torch.testing.assert_close(c, _expected(a1, b1, a2, b2), rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("M,N,K", [(128, 128, 256), (96, 80, 320)])
def test_hand_written_swizzle_on_the_gpu(M, N, K):
    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn(N, K, device="cuda").half()
    c = torch.full((M, N), float("nan"), device="cuda")
    tilelang.compile(hand_swizzled_gemm(M, N, K), target="cuda")(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float().T, rtol=1e-3, atol=1e-2)
