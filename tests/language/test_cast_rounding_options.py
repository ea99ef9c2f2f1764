"""T.cast's rounding options (`round`, `sat`, `rbits`): checked as the reference checks them;
"rn"/"rz"/"rp"/"rm" are reserved (the usual conversion), stochastic rounding ("rs") needs
sm_100a and is a located error here."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.language.tir.ir import _VALID_CAST_ROUNDING_MODES, cast


def test_tir_ir_path_is_t_cast():
    assert cast is T.cast
    assert _VALID_CAST_ROUNDING_MODES == {"", "rn", "rz", "rp", "rm", "rs"}


@pytest.mark.parametrize("kwargs,match", [
    (dict(round="up"), "Invalid round 'up'"),
    (dict(sat="yes"), "Invalid sat 'yes'"),
    (dict(round="rs"), "rbits is required"),
    (dict(round="rz", rbits=7), "rbits is only valid with round='rs'"),
])
def test_invalid_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        T.cast(T.float32(1.5), "float8_e4m3fn", **kwargs)


def _converter(**options):
    @T.prim_func
    def convert(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float16)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = T.cast(A[i], T.float16, **options)
    return convert


@pytest.mark.parametrize("options", [dict(round="rn"), dict(round="rz"), dict(round="rm"),
                                     dict(sat=False)])
def test_reserved_modes_convert_as_usual(options):
    a = torch.randn(64) * 1000
    b = torch.full((64,), float("nan"), dtype=torch.float16)
    tilelang.compile(_converter(**options), target="cpu")(a, b)
    assert torch.equal(b, a.to(torch.float16))
    plain = tilelang.compile(_converter(), target="cuda -arch=sm_90a").get_kernel_source()
    moded = tilelang.compile(_converter(**options), target="cuda -arch=sm_90a").get_kernel_source()
    assert moded == plain


@pytest.mark.parametrize("dtype,tag", [("float16", "FP16"), ("bfloat16", "BF16"),
                                       ("float8_e4m3fn", "FP8"), ("float8_e5m2", "FP8")])
def test_stochastic_rounding_is_a_located_error(dtype, tag):
    """Raised when the function is compiled for any target (as the reference's lowering
    raises it for a target without sm_100a features), not when it is defined."""
    @T.prim_func
    def kernel(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), dtype)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = T.cast(A[i], dtype, round="rs", rbits=T.uint32(0x12345678))

    for target in ("cpu", "cuda -arch=sm_90a"):
        with pytest.raises(NotImplementedError, match=f"Stochastic rounding f32-to-{tag} "
                                                      "requires sm_100a") as info:
            tilelang.compile(kernel, target=target)
        assert "test_cast_rounding_options.py" in str(info.value)
    with pytest.raises(NotImplementedError, match="requires sm_100a"):
        tilelang.lower(kernel, target="cuda -arch=sm_90a")


def test_stochastic_rounding_sat_false_is_raised_when_compiled():
    @T.prim_func
    def kernel(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.bfloat16)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = T.cast(A[i], T.bfloat16, round="rs", sat=False, rbits=T.uint32(7))

    with pytest.raises(ValueError, match="sat=false is not supported for stochastic rounding "
                                         "f32 -> bf16"):
        tilelang.lower(kernel, target="cuda -arch=sm_90a")


def test_stochastic_rounding_checks_first():
    with pytest.raises(ValueError, match="sat=false is not supported for stochastic rounding "
                                         "f32 -> fp16"):
        T.cast(T.float32(1.0), "float16", round="rs", sat=False, rbits=T.uint32(1))
    with pytest.raises(ValueError, match="converts float32"):
        T.cast(T.float16(1.0), "float8_e4m3fn", round="rs", rbits=T.uint32(1))
