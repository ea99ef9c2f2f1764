"""T.wgmma_gemm on the GPU (sm_90a): issued without waiting, completed by T.wait_wgmma or by
the compiler's own wait; whole and sliced K tiles, B transposed or not, ragged M/N/K; fresh
random inputs, poisoned outputs, torch reference."""

import os
import sys

import pytest
import torch

import tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
from wgmma_gemm_kernels import wgmma_gemm_tiles  # noqa: E402

sys.path.pop(0)

pytestmark = pytest.mark.gpu

from .hopper import need_sm90  # noqa: E402


@pytest.mark.parametrize("M,N,K,k_slices,trans_B,wait", [
    (64, 64, 32, 1, False, True), (200, 136, 96, 1, False, False), (130, 70, 160, 1, True, True),
    (100, 72, 80, 2, True, True), (70, 130, 48, 2, False, False)])
def test_matches_torch(M, N, K, k_slices, trans_B, wait):
    need_sm90()
    kernel = tilelang.compile(wgmma_gemm_tiles(M, N, K, k_slices=k_slices, trans_B=trans_B,
                                               wait=wait), target="cuda")
    if k_slices == 1:
        assert "tl::wgmma_gemm_ss<" in kernel.get_kernel_source()
    for _ in range(2):
        a = torch.randn(M, K, device="cuda").half()
        b = torch.randn(*((N, K) if trans_B else (K, N)), device="cuda").half()
        d = torch.full((M, N), float("nan"), device="cuda").half()
        kernel(a, b, d)
        ref = (a.float() @ (b.float().T if trans_B else b.float())).half()
        torch.testing.assert_close(d, ref, rtol=1e-2, atol=1e-2)
