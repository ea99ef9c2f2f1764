"""Staged GEMM epilogues on the GPU (transform/stage_epilogue.py): TMA store (sm_90a), 16-byte
vector stores, and off, at ragged sizes, also in a persistent tile loop whose epilogue tile
reuses the pipeline's stage bytes; outputs NaN-poisoned first, checked against float64."""

import pytest
import torch

import tilelang
from tilelang.transform.pass_config import PassConfigKey

from .epilogue_kernels import atomic_staged, gemm, hand_staged, persistent

pytestmark = pytest.mark.gpu

MODES = {
    "auto": {},
    "vector": {PassConfigKey.TL_DISABLE_TMA_STORE: True},
    "off": {PassConfigKey.TL_DISABLE_STAGED_EPILOGUE: True},
}


def _check(func, M, N, K, configs):
    kern = tilelang.compile(func, pass_configs=configs)
    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn(K, N, device="cuda").half()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    kern(a, b, c)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double())
    assert not torch.isnan(c).any()
    torch.testing.assert_close(c.double(), ref, rtol=1e-2, atol=5e-2)
    return kern


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("M,N,K,cfg", [
    (1000, 1000, 520, (128, 256, 64, 3, 256)),
    (1000, 1000, 520, (256, 128, 64, 3, 256)),
    (333, 264, 96, (128, 128, 32, 3, 128)),
    (130, 8, 64, (128, 128, 32, 2, 128)),
    (257, 130, 64, (128, 128, 32, 3, 128)),   # 260-byte rows: vector path even on sm_90a
])
def test_gemm_epilogue_ragged(mode, M, N, K, cfg):
    bm, bn, bk, s, t = cfg
    _check(gemm(M, N, K, bm, bn, bk, s, t), M, N, K, MODES[mode])


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("M,N,K,blocks", [(1000, 1000, 96, 4), (700, 520, 200, 3)])
def test_persistent_epilogue_reuses_stage_bytes(mode, M, N, K, blocks):
    _check(persistent(M, N, K, blocks=blocks), M, N, K, MODES[mode])


@pytest.mark.parametrize("M,N,K", [(1000, 1000, 520), (4096, 4096, 256)])
def test_hand_staged_reuses_warp_specialised_stages(M, N, K):
    _check(hand_staged(M, N, K, 128, 256, 64, 3, 256), M, N, K, {})


@pytest.mark.parametrize("M,N,K", [(256, 512, 128), (200, 520, 96)])
def test_atomic_adds_from_a_swizzled_slice_tile(M, N, K):
    """Accumulator slices stored into a tile the compiler swizzles (layout_inference.py,
    _staging_tiles), read back 4 floats at a time by T.atomic_addx4: every element added
    exactly once (C starts at zero; ragged edges guarded by the program)."""
    kern = tilelang.compile(atomic_staged(M, N, K))
    for _ in range(2):
        a = torch.randn(M, K, device="cuda").half()
        b = torch.randn(K, N, device="cuda").half()
        c = torch.zeros(M, N, device="cuda")
        kern(a, b, c)
        torch.cuda.synchronize()
        torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-3, atol=1e-2)

