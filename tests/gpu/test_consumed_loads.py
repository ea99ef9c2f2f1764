"""On the GPU (sm_90a), TL_EXPERIMENT=no_consumed_release_fence: warp-specialised loops whose
consumers read a TMA stage with ordinary loads and hand it back without a proxy fence where
every such load feeds a wgmma first (analysis/consumed_loads.py). Fresh random inputs, output
poisoned with NaN, ragged sizes, float64 references; the stages are reused many times, so a
stage overwritten before its loads completed would show."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
from consumed_loads_kernels import score_step  # noqa: E402

sys.path.pop(0)

pytestmark = pytest.mark.gpu

from .hopper import need_sm90  # noqa: E402


def _reference(kt, q, lvec, m, bn, masked):
    n = kt.shape[0]
    s = kt.double() @ q.double().T * 0.125 - lvec.double()[None, :]
    p = torch.exp2(s)
    if masked:
        rows = torch.arange(n, device=kt.device)[:, None]
        cols = torch.arange(n, device=kt.device)[None, :]
        p = torch.where(rows >= cols, p, torch.zeros_like(p))
    # each score is rounded to float16 before its gemm, as the kernel does
    return p.to(torch.float16).double() @ q.double()


@pytest.mark.parametrize("n", [512, 1000, 4096])
@pytest.mark.parametrize("masked", [False, True])
def test_score_step_matches_torch(monkeypatch, n, masked):
    need_sm90()
    monkeypatch.setenv("TL_EXPERIMENT", "no_consumed_release_fence")
    torch.manual_seed(n + masked)
    kt = torch.randn(n, 64, device="cuda", dtype=torch.float16)
    q = torch.randn(n, 64, device="cuda", dtype=torch.float16)
    lvec = torch.rand(n, device="cuda") * 4 + 2  # keeps exp2 of the scores in float16 range
    dv = torch.full((n, 64), float("nan"), device="cuda")
    lsum = torch.zeros(64, 64, device="cuda")
    kern = tilelang.compile(score_step(n, masked=masked), target="cuda")
    kern(kt, q, lvec, dv, lsum)
    torch.cuda.synchronize()
    ref = _reference(kt, q, lvec, 64, 64, masked)
    torch.testing.assert_close(dv.double(), ref, rtol=2e-2, atol=2e-1)
