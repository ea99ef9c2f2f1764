"""T.reshape / T.view on the GPU: the same elements through both names (swizzled shared tiles
and gemm accumulators included), against torch, outputs poisoned."""

import pytest
import torch

import tilelang

from . import view_kernels as V

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("swizzle", [False, True])
def test_shared_reshape(swizzle):
    k = tilelang.compile(V.shared_reshape(2048, 64, swizzle), target="cuda")
    a = torch.randn(32, 64, device="cuda", dtype=torch.float16)
    b = torch.full((2048,), float("nan"), device="cuda", dtype=torch.float16)
    k(a, b)
    assert torch.equal(b, a.reshape(-1))


@pytest.mark.parametrize("rows,cols,groups", [(2, 384, 3), (32, 32, 4), (16, 256, 2)])
def test_fragment_reshape(rows, cols, groups):
    k = tilelang.compile(V.fragment_reshape(rows, cols, groups), target="cuda")
    a = torch.randn(rows, cols, device="cuda")
    b = torch.full((rows, groups), float("nan"), device="cuda")
    k(a, b)
    torch.testing.assert_close(b, (2 * a).view(rows, groups, -1).max(2).values)


def test_gemm_accumulator_reshape():
    k = tilelang.compile(V.gemm_scores(), target="cuda")
    q = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    kk = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    w = torch.randn(4, 16, device="cuda")
    o = torch.full((64, 4), float("nan"), device="cuda")
    k(q, kk, w, o)
    s = (kk.float() @ q.float().T).view(64, 4, 16)
    torch.testing.assert_close(o, (s.clamp(min=0) * w).sum(-1), rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("dtype,new", [("float32", "float16"), ("float16", "float32")])
def test_global_view_reinterprets(dtype, new):
    k = tilelang.compile(V.global_view(1024, 32, dtype, new), target="cuda")
    a = torch.randn(1024, device="cuda").to(getattr(torch, dtype))
    ndt = getattr(torch, new)
    cols = 32 * a.element_size() // torch.empty(0, dtype=ndt).element_size()
    b = torch.zeros(32, cols, device="cuda", dtype=ndt)
    k(a, b)
    assert torch.equal(b.view(torch.uint8), a.view(ndt).view(32, cols).view(torch.uint8))
