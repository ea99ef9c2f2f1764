"""On the GPU, experiment `mma_k_loop_rolled` (codegen/gemm_sm80.py): an mma.sync gemm whose
k-steps run as a loop next to fragments that take nearly every register gives torch's
product, and the fragment kept across it survives. Fresh random inputs, outputs poisoned."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from rolled_gemm_kernels import dq_step  # noqa: E402

sys.path.pop(0)

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("keep", [208, 64])
@pytest.mark.parametrize("rolled", [True, False])
def test_dq_step_matches_torch(monkeypatch, keep, rolled):
    if rolled:
        monkeypatch.setenv("TL_EXPERIMENT", "mma_k_loop_rolled")
    else:
        monkeypatch.delenv("TL_EXPERIMENT", raising=False)
    torch.manual_seed(keep + rolled)
    rows = keep * 256 // 192
    s = torch.randn(128, 32, device="cuda", dtype=torch.float16)
    k = torch.randn(128, 192, device="cuda", dtype=torch.float16)
    acc = torch.randn(rows, 192, device="cuda")
    out = torch.full((32, 192), float("nan"), device="cuda")
    kept = torch.full((rows, 192), float("nan"), device="cuda")
    kern = tilelang.compile(dq_step(0, keep=keep), target="cuda")
    assert kern.get_kernel_source().count(", true>") == (1 if rolled and keep == 208 else 0)
    kern(s, k, acc, out, kept)
    torch.cuda.synchronize()
    torch.testing.assert_close(out.double(), s.double().T @ k.double(), rtol=1e-3, atol=1e-2)
    torch.testing.assert_close(kept, 2 * acc, rtol=0, atol=0)
