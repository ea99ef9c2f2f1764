"""`T.round(x, rounding_mode)` on 16-bit floats and builds for 8-bit floats (the reference's
issue 2635): halfway cases go to the even neighbour by default and away from zero with
"ties-away-from-zero" (float32 is covered in test_math_modes.py)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from device_params import HAS_COMPILER, DEVICES


def _round_kernel(dtype, mode):
    @T.prim_func
    def main(A: T.Tensor((16,), dtype), B: T.Tensor((16,), dtype)):
        with T.Kernel(1, threads=16):
            for i in T.Parallel(16):
                B[i] = T.round(A[i], mode) if mode is not None else T.round(A[i])
    return main


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("mode", [None, "ties-to-even", "ties-away-from-zero"])
def test_halfway_cases_of_16_bit_floats(device, dtype, mode):
    values = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -3.5, 0.25, -0.75, 7.0, 1.0,
                           -1.0, 0.0, 4.5, -4.5]).to(getattr(torch, dtype))
    kernel = tilelang.compile(_round_kernel(dtype, mode),
                              target="cpu" if device == "cpu" else "cuda")
    out = torch.full_like(values, float("nan")).to(device)
    kernel(values.to(device), out)
    x = values.double()
    if mode == "ties-away-from-zero":
        expect = (torch.sign(x) * torch.floor(x.abs() + 0.5)).to(values.dtype)
    else:
        expect = torch.round(x).to(values.dtype)  # torch rounds halfway cases to even
    assert torch.equal(out.cpu(), expect)


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3", "float8_e5m2"])
def test_round_builds_for_sm90(dtype):
    tilelang.compile(_round_kernel(dtype, "ties-away-from-zero"), target="cuda -arch=sm_90a")


def test_unknown_mode_is_a_located_error():
    with pytest.raises(ValueError, match="Unsupported T.round rounding_mode 'up'") as info:
        _round_kernel("float32", "up")
    assert "test_round_modes.py" in str(info.value)
