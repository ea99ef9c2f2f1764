"""Infinite and NaN constants of the 8-bit float types: torch's codes (E5M2 has +-inf; E4M3
has none, an infinite constant is +-448 there), NaN and E5M2's infinities written as bits,
because CUDA's fp8 constructors saturate an infinity to the largest finite value."""

import pytest
import torch

import tilelang
import tilelang.language as T

from device_params import DEVICES, HAS_COMPILER, target_of

CASES = [("float8_e5m2", "inf"), ("float8_e5m2", "-inf"), ("float8_e5m2", "nan"),
         ("float8_e4m3fn", "inf"), ("float8_e4m3fn", "nan"), ("float16", "inf"),
         ("bfloat16", "-inf"), ("float32", "inf"), ("float64", "-inf")]


def _fill(dtype, value, n=37):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=32):
            T.fill(A, T.cast(value, dtype) if value != value else
                   (T.infinity(dtype) if value > 0 else -T.infinity(dtype)))
    return main


def _expected(dtype, value, n=37):
    if dtype == "float8_e4m3fn" and value in (float("inf"), float("-inf")):
        # E4M3 has no infinity: an infinity saturates to +-448 on both targets (torch's own
        # answer depends on its version: 2.13 saturates on the CPU, 2.11 gave NaN)
        value = 448.0 if value > 0 else -448.0
    return torch.full((n,), value).to(getattr(torch, dtype))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype, text", CASES)
def test_nonfinite_fill_matches_torch(device, dtype, text):
    value = float(text)
    out = torch.zeros(37, dtype=getattr(torch, dtype), device=device)
    tilelang.compile(_fill(dtype, value), target=target_of(device))(out)
    want = _expected(dtype, value).to(device)
    # compare codes: NaN == NaN, and an infinity must not come back as the largest finite
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[out.element_size()]
    if value != value:
        assert torch.isnan(out.float()).all(), out
    else:
        assert torch.equal(out.view(bits), want.view(bits)), (out, want)


@pytest.mark.skipif(not HAS_COMPILER, reason="needs NVRTC or nvcc")
@pytest.mark.parametrize("dtype, text, code", [("float8_e5m2", "inf", "0x7c"),
                                               ("float8_e5m2", "-inf", "0xfc"),
                                               ("float8_e4m3fn", "nan", "0x7f"),
                                               ("float8_e5m2", "nan", "0x7f")])
def test_nonfinite_fp8_constants_are_codes(dtype, text, code):
    kernel = tilelang.compile(_fill(dtype, float(text)), target="cuda -arch=sm_90a")
    ctype = "fp8_e5_t" if dtype == "float8_e5m2" else "fp8_e4_t"
    assert f"tl::bit_cast<{ctype}>((unsigned char){code})" in kernel.get_kernel_source()
