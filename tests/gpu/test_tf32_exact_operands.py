"""float32 gemms whose register operand holds converted bfloat16 / float16 / int8 values (the
mma takes those registers unrounded: transform/analysis/exact_values.py), and one whose
operand does not (rounded as before), on the GPU against float64 torch: fresh random inputs,
outputs poisoned, ragged M."""

import os
import sys

import numpy as np
import pytest
import torch

import tilelang
from tilelang.interp.numerics import tf32

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "transform"))
from exact_operand_kernels import converted_a, converted_b  # noqa: E402

pytestmark = pytest.mark.gpu


def _tf32(t):
    return torch.from_numpy(tf32(t.float().cpu().numpy())).double()


def _input(shape, dtype):
    if dtype == torch.int8:
        return torch.randint(-128, 128, shape, dtype=dtype, device="cuda")
    return torch.randn(shape, device="cuda").to(dtype)


@pytest.mark.parametrize("M", [200, 333])
@pytest.mark.parametrize("src,fill", [("bfloat16", "copy"), ("float16", "parallel"),
                                      ("int8", "copy"), ("bfloat16", "shifted"),
                                      ("float32", "shared32")])
def test_converted_a_operand(M, src, fill):
    N, K = 32, 512
    k = tilelang.compile(converted_a(M, N, K, src=src, fill=fill), target="cuda")
    a = _input((M, K), getattr(torch, src))
    b = torch.randn(N, K, device="cuda")
    c = torch.full((M, N), float("nan"), device="cuda")
    k(a, b, c)
    a_values = a.double().cpu() + (0.1 if fill == "shifted" else 0.0)
    expect = _tf32(a_values) @ _tf32(b).T
    torch.testing.assert_close(c.double().cpu(), expect, rtol=1e-5, atol=1e-4 * K ** 0.5)


@pytest.mark.parametrize("N", [96, 136])
def test_converted_b_operand(N):
    M, K = 64, 128
    k = tilelang.compile(converted_b(M, N, K), target="cuda")
    a = torch.randn(M, K, device="cuda")
    b = _input((K, N), torch.int8)
    c = torch.full((M, N), float("nan"), device="cuda")
    k(a, b, c)
    expect = _tf32(a) @ b.double().cpu()
    torch.testing.assert_close(c.double().cpu(), expect, rtol=1e-5, atol=1e-3)
    assert np.isfinite(c.cpu().numpy()).all()
