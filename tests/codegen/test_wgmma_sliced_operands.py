"""Shared gemm operands sliced at offsets computed at run time (`q[:, j * 64:(j + 1) * 64]` in a
`T.unroll`, as the reference's warp_specialize_flashmla example writes them) stay on wgmma on
sm_90a when the offsets are provably whole k-steps / swizzle atoms: the descriptor of the slice
is the tile's advanced by the slice's byte offset. Offsets that are not provably so keep the
mma.sync path; both compute the same values."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T


def sliced_k(M, N, K, k_piece, trans_B=True, k0=0, threads=128):
    """C = A[:, k0:] @ B[:, k0:]^T (or with B stored K x N), one 64-row slab per block, the K
    loop written as `k_piece`-wide slices of whole shared tiles in a T.unroll loop."""
    b_shape = (N, K) if trans_B else (K, N)
    pieces = (K - k0) // k_piece

    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor(b_shape, "float16"),
               C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, 64), threads=threads) as bm:
            a = T.alloc_shared((64, K), "float16")
            b = T.alloc_shared(b_shape, "float16")
            acc = T.alloc_fragment((64, N), "float32")
            T.copy(A[bm * 64, 0], a)
            T.copy(B, b)
            for j in T.unroll(pieces):
                lo = k0 + j * k_piece
                if trans_B:
                    T.gemm(a[:, lo:lo + k_piece], b[:, lo:lo + k_piece], acc, transpose_B=True,
                           clear_accum=(j == 0))
                else:
                    T.gemm(a[:, lo:lo + k_piece], b[lo:lo + k_piece, :], acc, clear_accum=(j == 0))
            T.copy(acc, C[bm * 64, 0])
    return kernel


def _gemm_templates(func):
    src = tilelang.lower(func, target="cuda -arch=sm_90a")
    return re.findall(r"tl::(\w*gemm_ss)<", src)


@pytest.mark.parametrize("trans_B", [True, False])
def test_whole_atom_slices_stay_on_wgmma(trans_B):
    assert set(_gemm_templates(sliced_k(128, 64, 256, 64, trans_B))) == {"wgmma_gemm_ss"}


def test_slices_of_whole_k_steps_stay_on_wgmma():
    # 32 columns of float16: two k-steps, half a 128-byte swizzle row
    assert set(_gemm_templates(sliced_k(128, 64, 128, 32))) == {"wgmma_gemm_ss"}


def test_slices_off_the_k_step_keep_mma_sync():
    # slices starting 8 columns (half a float16 k-step) into the tile: no descriptor
    # addresses them
    assert set(_gemm_templates(sliced_k(64, 64, 64, 16, k0=8))) == {"gemm_ss"}


def _inputs(M, N, K, trans_B, device="cpu"):
    a = torch.randn(M, K, device=device).half()
    b = torch.randn(*((N, K) if trans_B else (K, N)), device=device).half()
    return a, b, torch.full((M, N), float("nan"), device=device)


def _expected(a, b, trans_B, K, k_piece, k0):
    hi = k0 + (K - k0) // k_piece * k_piece
    a = a.float()[:, k0:hi]
    return a @ (b.float()[:, k0:hi].T if trans_B else b.float()[k0:hi])


@pytest.mark.parametrize("k_piece,trans_B,k0", [(64, True, 0), (64, False, 0), (16, True, 8)])
def test_interpreter(k_piece, trans_B, k0):
    a, b, c = _inputs(128, 64, 128, trans_B)
    tilelang.compile(sliced_k(128, 64, 128, k_piece, trans_B, k0), target="cpu")(a, b, c)
    torch.testing.assert_close(c, _expected(a, b, trans_B, 128, k_piece, k0), rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("M,K,k_piece,trans_B,k0", [(192, 256, 64, True, 0), (64, 256, 64, False, 0),
                                                     (128, 128, 32, True, 0), (128, 64, 16, True, 8),
                                                     (80, 128, 32, False, 0)])
def test_on_the_gpu(M, K, k_piece, trans_B, k0):
    a, b, c = _inputs(M, 64, K, trans_B, "cuda")
    tilelang.compile(sliced_k(M, 64, K, k_piece, trans_B, k0), target="cuda")(a, b, c)
    torch.testing.assert_close(c, _expected(a, b, trans_B, K, k_piece, k0), rtol=1e-3, atol=1e-2)
