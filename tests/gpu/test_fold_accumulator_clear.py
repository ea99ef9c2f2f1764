"""Cleared accumulators folded into the wgmma (transform/fold_accumulator_clear.py) on the
GPU: `epilogue_kernels.cleared_tiles` with the fold and without, against float64 on fresh
inputs with NaN-poisoned outputs."""

import pytest
import torch

import tilelang

from .epilogue_kernels import cleared_tiles as _kernel
from .hopper import need_sm90

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("between", ["", "other", "read"])
@pytest.mark.parametrize("fold", [True, False])
def test_folded_clears_compute_the_same(between, fold):
    need_sm90()
    torch.manual_seed(len(between) + fold)
    kern = tilelang.compile(_kernel(between), target="cuda",
                            pass_configs=None if fold else {"tl.disable_clear_fold": True})
    assert ("folded" in kern.get_host_source()) == (fold and between != "read")
    a = torch.randn(64, 64, device="cuda").half()
    b = torch.randn(256, 64, device="cuda").half()
    c = torch.full((64, 256), float("nan"), device="cuda")
    d = torch.full((64,), float("nan"), device="cuda")
    kern(a, b, c, d)
    torch.cuda.synchronize()
    ref = a.double() @ b.double().T
    torch.testing.assert_close(c.double(), ref, rtol=1e-3, atol=1e-3)
    if between == "other":
        torch.testing.assert_close(d, torch.full_like(d, 4.0))
    elif between == "read":  # the row sums of the freshly cleared accumulator: zeros
        torch.testing.assert_close(d, torch.zeros_like(d))
