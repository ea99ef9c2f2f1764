"""Panelled launch of large GEMM-like grids (transform/rasterize.py): applied only to grids of
512+ blocks whose pipelined loop loads one tile by block row and one by block column, never
when the user chose with T.use_swizzle (including turning it off), and the results on the CPU
interpreter do not depend on it."""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T

from transform_helpers import SM90, run_passes


def gemm(M, N, K, bm=64, bn=64, bk=32, swizzle=None):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            if swizzle is not None:
                T.use_swizzle(panel_size=swizzle)
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


def attention_like(S, H, bm=64, bn=64, D=64):
    """Q depends on both block indices: launch order already keeps a head's K/V together."""
    @T.prim_func
    def main(Q: T.Tensor((H, S, D), "float16"), K: T.Tensor((H, S, D), "float16"),
             O: T.Tensor((H, S, D), "float32")):
        with T.Kernel(T.ceildiv(S, bm), H, threads=128) as (bx, by):
            Q_s = T.alloc_shared((bm, D), "float16")
            K_s = T.alloc_shared((bn, D), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.copy(Q[by, bx * bm:(bx + 1) * bm, :], Q_s)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(S, bn), num_stages=2):
                T.copy(K[by, k * bn:(k + 1) * bn, :], K_s)
                T.gemm(Q_s, K_s, acc, transpose_B=True)
            T.copy(acc, O[by, bx * bm:(bx + 1) * bm, 0:bn])

    return main


def _panelled(func):
    kernel, ctx = run_passes(func, "rasterize", target=SM90)
    return kernel.attr("use_swizzle"), ctx


def test_large_gemm_grid_is_panelled():
    attr, ctx = _panelled(gemm(4096, 2112, 128))   # 33 x 64 blocks
    assert attr == (8, "row")
    assert any("panels of 8 rows" in n for n in ctx.notes)
    assert "tl::rasterize_row(8, blockIdx.x, blockIdx.y" in tilelang.lower(
        gemm(4096, 2112, 128), target=SM90)


@pytest.mark.parametrize("func", [
    gemm(1024, 1024, 128),                 # 256 blocks: launch order kept
    gemm(4096, 2112, 128, swizzle=0),      # explicitly off
    attention_like(4096, 32),              # Q tile needs both block indices
])
def test_left_alone(func):
    attr, _ = _panelled(func)
    assert attr is None


def test_explicit_panel_is_kept():
    assert _panelled(gemm(4096, 2112, 128, swizzle=4))[0] == (4, "row")


def test_results_do_not_depend_on_it_on_the_interpreter():
    M, N, K = 200, 136, 64
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    outs = []
    for swizzle in (None, 0, 3):
        c = torch.full((M, N), float("nan"))
        tilelang.compile(gemm(M, N, K, swizzle=swizzle), target="cpu")(a, b, c)
        outs.append(c)
    torch.testing.assert_close(outs[0], (a.double() @ b.double()).float(), rtol=1e-3, atol=1e-3)
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])

