"""A GEMM grid large enough to be launched in panels (transform/rasterize.py) computes the same
as torch in float64 at ragged sizes, with and without the panels; outputs NaN-poisoned."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "transform"))
from test_rasterize import gemm  # noqa: E402


@pytest.mark.parametrize("M,N,K,swizzle", [(4100, 2100, 200, None), (4100, 2100, 200, 0),
                                           (4000, 2060, 72, None)])
def test_panelled_gemm_matches_torch(M, N, K, swizzle):
    torch.manual_seed(M + N + K)
    func = gemm(M, N, K, swizzle=swizzle)
    kernel = tilelang.compile(func, target="cuda")
    assert ("rasterize_row" in kernel.get_kernel_source()) == (swizzle is None)
    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn(K, N, device="cuda").half()
    c = torch.full((M, N), float("nan"), device="cuda")
    kernel(a, b, c)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-3, atol=1e-3)
