"""T.copy of one element inside T.Parallel on the GPU: ragged sources, the safe value outside
them, dtype conversion; fresh random inputs, poisoned outputs, torch reference."""

import os
import sys

import pytest
import torch

import tilelang
import tilelang.language as T

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "language"))
from test_copy_one_element import _expected, parallel_element_copy  # noqa: E402

sys.path.pop(0)

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("M,N,src,dst,pad", [
    (70, 75, T.float32, T.float32, -99), (45, 33, T.float32, T.float16, -7),
    (50, 40, T.float16, T.float32, None)])
def test_matches_torch(M, N, src, dst, pad):
    padded_M, padded_N = -(-M // 32) * 32, -(-N // 32) * 32
    kernel = tilelang.compile(parallel_element_copy(M, N, padded_M, padded_N, src, dst, pad),
                              target="cuda")
    a = torch.randn(M, N, device="cuda").to(getattr(torch, src))
    b = torch.full((padded_M, padded_N), float("nan"), device="cuda").to(getattr(torch, dst))
    kernel(a, b)
    torch.testing.assert_close(b.cpu(), _expected(a.cpu(), padded_M, padded_N,
                                                  getattr(torch, dst), pad))
