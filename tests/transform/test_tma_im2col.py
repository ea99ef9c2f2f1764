"""`T.c2d_im2col` on sm_90a (transform/warp_specialize/tma_im2col.py): where one TMA load in im2col mode gives
exactly the gathered tile, the warp-specialised producer issues it (with the coordinates of
output pixel m0 and the tap of k0); otherwise the gather stays a cp.async stage with a note
saying why. The generated CUDA compiles with NVRTC."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import tilelang

from transform_helpers import SM90, requires_compiler, run_passes

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "convolution"))
import example_convolution as ex  # noqa: E402


def conv(N, C, H, W, F, K, S, P, D, **cfg):
    cfg = {**dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=256), **cfg}
    return ex.convolution.get_tir(N, C, H, W, F, K, K, S, P, D, **cfg)


@pytest.mark.parametrize("shape,cfg", [
    ((2, 64, 9, 11, 128, 3, 1, 1, 1), {}),
    ((2, 128, 9, 11, 128, 3, 2, 1, 1), {}),                  # stride 2
    ((1, 64, 12, 12, 128, 3, 1, 2, 2), {}),                  # dilation 2
    ((4, 64, 6, 6, 128, 1, 1, 0, 1), {}),                    # 1x1
    ((2, 64, 9, 11, 128, 3, 1, 1, 1), dict(block_K=32)),     # 64-byte rows, 64B swizzle
])
def test_producer_loads_the_tile_in_im2col_mode(shape, cfg):
    src = tilelang.lower(conv(*shape, **cfg), target=SM90)
    assert src.count("tl::tma_load_im2col(") == 1
    assert "cp_async" not in src[src.index("'producer'"):]


@pytest.mark.parametrize("shape,cfg,why", [
    ((2, 96, 9, 11, 128, 3, 1, 1, 1), {}, "C = 96 is not a multiple of block_K = 64"),
    ((1, 64, 4, 4, 128, 3, 1, 130, 1), {}, "outside TMA im2col's ranges"),   # corner -130
])
def test_falls_back_to_cp_async_with_the_reason(shape, cfg, why):
    _, ctx = run_passes(conv(*shape, **cfg), "warp_specialize", target=SM90)
    assert any(why in n for n in ctx.notes), ctx.notes
    assert "tma_load_im2col" not in tilelang.lower(conv(*shape, **cfg), target=SM90)


def test_non_square_filters_keep_the_explicit_gather():
    func = ex.convolution.get_tir(2, 64, 9, 11, 128, 2, 3, 1, 1, 1, block_M=128, block_N=128,
                                  block_K=64, num_stages=3, threads=256)
    assert "tma_load_im2col" not in tilelang.lower(func, target=SM90)


@requires_compiler
def test_compiles():
    tilelang.compile(conv(2, 64, 9, 11, 128, 3, 1, 1, 1), target=SM90)
