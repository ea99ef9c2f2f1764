"""Convolutions whose im2col tile is one TMA load in im2col mode (sm_90a, T.c2d_im2col in a
warp-specialised pipeline; transform/warp_specialize/tma_im2col.py) against torch conv2d in float64: fresh
random inputs, NaN-poisoned outputs, ragged M and F, stride, dilation, 1x1, both swizzles."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang

from .hopper import need_sm90

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "convolution"))
import example_convolution as ex  # noqa: E402

CASES = [
    # N, C, H, W, F, K, stride, pad, dil, tile config
    ((2, 64, 9, 11, 128, 3, 1, 1, 1), dict()),
    ((2, 128, 9, 11, 200, 3, 2, 1, 1), dict()),
    ((1, 64, 12, 12, 128, 3, 1, 2, 2), dict()),
    ((4, 64, 6, 6, 128, 1, 1, 0, 1), dict()),
    ((2, 64, 9, 11, 128, 3, 1, 1, 1), dict(block_K=32)),
    ((3, 64, 13, 7, 64, 3, 1, 0, 1), dict(block_N=64, threads=128)),
    ((4, 256, 28, 28, 256, 3, 1, 1, 1), dict(block_N=256, num_stages=4)),   # the bench tiles
    ((1, 64, 3, 5, 64, 3, 1, 1, 1), dict()),                    # M = 15: one partial tile
    ((2, 64, 10, 10, 64, 3, 2, 2, 2), dict()),                  # stride and dilation
    ((1, 128, 8, 8, 128, 5, 1, 2, 1), dict()),                  # 5x5, C over two tiles
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "N{}C{}H{}W{}F{}k{}s{}p{}d{}".format(*c[0]))
def test_tma_im2col_conv_matches_torch(case):
    need_sm90()
    (N, C, H, W, F, K, S, P, D), cfg = case
    cfg = {**dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=256), **cfg}
    func = ex.convolution.get_tir(N, C, H, W, F, K, K, S, P, D, **cfg)
    kernel = tilelang.compile(func, target="cuda")
    assert "tl::tma_load_im2col(" in kernel.get_kernel_source()
    torch.manual_seed(N * C + H)
    x = torch.randn(N, H, W, C, device="cuda", dtype=torch.float16)
    w = torch.randn(K, K, C, F, device="cuda", dtype=torch.float16)
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1
    out = torch.full((N, OH, OW, F), float("nan"), device="cuda", dtype=torch.float16)
    kernel(x, w.reshape(K * K * C, F), out)
    ref = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2).double(), w.permute(3, 2, 0, 1).double(),
                                     stride=S, padding=P, dilation=D).permute(0, 2, 3, 1)
    assert not torch.isnan(out).any()
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < 2e-3, err
