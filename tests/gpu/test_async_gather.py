"""Asynchronous im2col gathers (cp.async with zero-fill inside T.Pipelined) on the GPU against
torch conv2d in float64: fresh random inputs, NaN-poisoned outputs, ragged sizes, stride,
dilation, padding, channel counts giving 16/8/4-byte copies and the synchronous fallback.
Marked `gpu`; skipped without a GPU."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "convolution"))
import example_convolution as ex  # noqa: E402

DEV = "cuda"

CASES = [
    # N, C, H, W, F, KH, KW, stride, pad, dil, tile config
    (2, 16, 9, 11, 24, 3, 3, 1, 1, 1, dict(block_M=64, block_N=64, block_K=32, num_stages=3)),
    (3, 64, 29, 31, 96, 3, 3, 2, 1, 2, dict()),                                  # defaults
    (1, 24, 13, 6, 40, 2, 3, 1, 2, 1, dict(block_M=64, block_N=64, block_K=64, num_stages=4)),
    (2, 4, 7, 9, 16, 3, 3, 1, 1, 1, dict(block_M=64, block_N=64, num_stages=2)),   # 8-byte copies
    (2, 2, 7, 5, 16, 3, 1, 2, 0, 1, dict(block_M=64, block_N=64, num_stages=3)),   # 4-byte copies
    (2, 3, 8, 8, 16, 3, 3, 1, 1, 1, dict(block_M=64, block_N=64, num_stages=3)),   # synchronous
    (4, 128, 14, 14, 128, 3, 3, 1, 1, 1, dict(block_M=128, block_N=128, block_K=64,
                                              num_stages=3, threads=256)),
    (2, 64, 17, 15, 256, 1, 1, 1, 0, 1, dict(block_M=128, block_N=256, block_K=64,
                                             num_stages=3, threads=256)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "N{}C{}H{}W{}F{}k{}x{}s{}p{}d{}".format(*c[:10]))
def test_conv2d_with_async_gather_matches_torch(case):
    N, C, H, W, F, KH, KW, s, p, d, cfg = case
    func = ex.convolution.get_tir(N, C, H, W, F, KH, KW, s, p, d, **cfg)
    kernel = tilelang.compile(func, target="cuda")
    torch.manual_seed(hash(case[:10]) % 2**31)
    x = torch.randn(N, H, W, C, device=DEV, dtype=torch.float16)
    w = torch.randn(KH, KW, C, F, device=DEV, dtype=torch.float16)
    OH = (H + 2 * p - d * (KH - 1) - 1) // s + 1
    OW = (W + 2 * p - d * (KW - 1) - 1) // s + 1
    out = torch.full((N, OH, OW, F), float("nan"), device=DEV, dtype=torch.float16)
    kernel(x, w.reshape(KH * KW * C, F), out)
    ref = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2).double(), w.permute(3, 2, 0, 1).double(),
                                     stride=s, padding=p, dilation=d).permute(0, 2, 3, 1)
    assert not torch.isnan(out).any(), "unwritten output"
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < 2e-3, err
