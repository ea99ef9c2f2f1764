"""Helpers of the sm_90a GPU tests."""

import pytest
import torch


def need_sm90():
    """Skip the calling test below Hopper (wgmma, TMA and setmaxnreg need sm_90a)."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("wgmma needs sm_90a")


def check_int4_gemm(dq, kernel, M, N, K, G, split_k=1, words=None):
    """Run an int4 dequant-GEMM kernel of examples/dequantize_gemm (module `dq`) on fresh
    random inputs and compare with float64 torch. C is poisoned with NaN, or zeroed when
    K slices add into it; `words(packed)` gives the code tensor the kernel reads (default:
    the packed bytes as int32 words)."""
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    packed, scale = dq.quantize_int4(torch.randn(N, K, device="cuda"), G)
    w = dq.dequantize_int4(packed, scale, G)
    out = torch.zeros((M, N), device="cuda", dtype=torch.float16)
    if split_k == 1:
        out.fill_(float("nan"))
    kernel(a, words(packed) if words else packed.view(torch.int32), scale, out)
    ref = a.double() @ w.double().t()
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert not torch.isnan(out).any() and err < 2e-3, err
