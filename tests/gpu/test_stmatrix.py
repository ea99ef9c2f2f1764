"""On the GPU: fragment -> 16-bit shared stores lowered to stmatrix (tests/transform/
test_stmatrix.py: which nests take it) store what the element-wise loop stores: wgmma and
mma.sync accumulators, computed values, a 16-bit fragment, a gemm operand tile (P of an
attention row), and slices of a wider tile (the vector path). Outputs NaN-poisoned, inputs
fresh random, ragged sizes."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "transform"))
from stmatrix_kernels import attention_row, gemm_half_slices, gemm_staged  # noqa: E402

from .hopper import need_sm90  # noqa: E402

def _run_gemm(func, M, N, K, out_dtype, scale=1.0):
    kernel = tilelang.compile(func, target="cuda")
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=out_dtype)
    kernel(a, b, c)
    torch.cuda.synchronize()
    ref = (a.float() @ b.float().T * scale).to(out_dtype)
    torch.testing.assert_close(c.float(), ref.float(), rtol=2e-2, atol=2e-2)
    return kernel


@pytest.mark.parametrize("M,N,K,bm,bn,threads,out", [
    (200, 136, 72, 64, 64, 128, "bfloat16"),
    (300, 260, 64, 128, 128, 256, "float16"),
    (130, 250, 96, 64, 128, 128, "bfloat16"),
    (100, 70, 40, 32, 64, 64, "float16"),       # mma.sync accumulators
    (90, 100, 64, 64, 32, 256, "bfloat16"),     # N split over 2 warpgroups, 64-byte swizzle
])
def test_accumulator_through_shared(M, N, K, bm, bn, threads, out):
    need_sm90()
    dtype = getattr(torch, out)
    kernel = _run_gemm(gemm_staged(M, N, K, bm=bm, bn=bn, threads=threads, out=out),
                       M, N, K, dtype)
    assert "stmatrix" in kernel.get_kernel_source()


def test_computed_values_and_16_bit_fragment():
    need_sm90()
    _run_gemm(gemm_staged(190, 200, 64, scale=0.5), 190, 200, 64, torch.bfloat16, scale=0.5)
    _run_gemm(gemm_staged(190, 200, 64, via_fragment=True), 190, 200, 64, torch.bfloat16)


def test_slices_of_a_wider_tile():
    need_sm90()
    M, N, K = 200, 136, 72
    kernel = tilelang.compile(gemm_half_slices(M, N, K), target="cuda")
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)
    c = torch.full((M, 2 * N), float("nan"), device="cuda", dtype=torch.float16)
    kernel(a, b, c)
    torch.cuda.synchronize()
    ref = a.float() @ b.float().T
    torch.testing.assert_close(c.float(), torch.cat([ref, 2 * ref], 1).half().float(),
                               rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("M,N,D", [(200, 64, 64), (64, 50, 128)])
def test_attention_row_p_tile(M, N, D):
    need_sm90()
    kernel = tilelang.compile(attention_row(M, N, D), target="cuda")
    q = torch.randn(M, D, device="cuda", dtype=torch.float16) / 4
    k = torch.randn(N, D, device="cuda", dtype=torch.float16) / 4
    v = torch.randn(N, D, device="cuda", dtype=torch.float16)
    o = torch.full((M, D), float("nan"), device="cuda", dtype=torch.float32)
    kernel(q, k, v, o)
    torch.cuda.synchronize()
    p = torch.softmax(q.float() @ k.float().T, dim=1)
    torch.testing.assert_close(o, p @ v.float(), rtol=2e-2, atol=2e-2)
