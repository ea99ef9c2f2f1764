"""Math with explicit rounding: `T.round(x, rounding_mode)`, `T.fast_rcp`, the IEEE operations
`T.ieee_add/sub/mul/fmaf/fdiv/frcp/fsqrt/frsqrt(..., rounding_mode)`, and the names the CUDA
source uses for them (fabs, htan, nearbyint, RoundTiesAwayFromZero, __fadd_rz, ...)."""

import math
import re

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.interp.ieee import round_exact

SM90 = "cuda -arch=sm_90a"
MODES = ("rn", "rz", "ru", "rd")


def unary(fn, dtype=T.float32, n=64):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=n):
            for i in T.Parallel(n):
                B[i] = fn(A[i])

    return main


def binary(fn, dtype=T.float32, n=64):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=n):
            for i in T.Parallel(n):
                B[i] = fn(A[i], C[i])

    return main


def ternary(fn, dtype=T.float32, n=64):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype), D: T.Tensor((n,), dtype),
             B: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=n):
            for i in T.Parallel(n):
                B[i] = fn(A[i], C[i], D[i])

    return main


def cpu(prog, *args):
    return tilelang.compile(prog, out_idx=[-1], target="cpu")(*args)


def source(prog, target=SM90):
    """The generated CUDA (not compiled: test_builds_for_sm90_and_sm75 compiles a sample)."""
    return tilelang.lower(prog, target=target)


def f32(*xs):
    return torch.tensor(xs, dtype=torch.float32)


def next_up(x):
    return float(np.nextafter(np.float32(x), np.float32(np.inf)))


# ---- T.round ----------------------------------------------------------------------------------

def test_round_rounds_ties_to_even_by_default():
    x = f32(0.5, 1.5, 2.5, -0.5, -2.5, 2.4, -2.6, 3.0)
    assert cpu(unary(T.round, n=8), x).tolist() == [0, 2, 2, -0.0, -2, 2, -3, 3]
    assert cpu(unary(lambda v: T.round(v, "ties-to-even"), n=8), x).tolist() == \
        [0, 2, 2, -0.0, -2, 2, -3, 3]


def test_round_ties_away_from_zero():
    x = f32(0.5, 1.5, 2.5, -0.5, -2.5, 2.4, -2.6, 3.0)
    out = cpu(unary(lambda v: T.round(v, "ties-away-from-zero"), n=8), x)
    assert out.tolist() == [1, 2, 3, -1, -3, 2, -3, 3]


def test_round_rejects_unknown_modes():
    with pytest.raises(ValueError, match="rounding_mode"):
        unary(lambda v: T.round(v, "up"))


def test_round_modes_in_the_cuda_source():
    assert re.search(r"\bnearbyint\(", source(unary(T.round)))
    away = source(unary(lambda v: T.round(v, "ties-away-from-zero")))
    assert "RoundTiesAwayFromZero(" in away and "nearbyint" not in away


def test_abs_of_floats_is_fabs_in_the_source_and_abs_of_ints_is_not():
    assert "fabs(" in source(unary(T.abs))
    assert "fabs(" in source(unary(T.abs, T.float16))
    ints = source(unary(T.abs, T.int32))
    assert "tl::abs(" in ints and "fabs" not in ints


@pytest.mark.parametrize("fn", [T.tan, T.__tan])
@pytest.mark.parametrize("dtype", [T.float16, T.bfloat16])
def test_tan_of_16_bit_floats(fn, dtype):
    assert "htan(" in source(unary(fn, dtype))
    x = torch.linspace(-1, 1, 64).to(dtype.torch)
    out = cpu(unary(fn, dtype), x)
    torch.testing.assert_close(out, torch.tan(x.double()).to(dtype.torch), rtol=1e-2, atol=1e-2)


def test_fast_rcp():
    assert "tl::fast_rcp(" in source(unary(T.fast_rcp))
    assert "tl::rcp(" in source(unary(T.fast_rcp, T.float64))
    x = torch.rand(64) + 0.25
    torch.testing.assert_close(cpu(unary(T.fast_rcp), x), 1 / x)


# ---- IEEE operations --------------------------------------------------------------------------

def test_rounding_mode_is_checked_where_the_call_is_written():
    with pytest.raises(ValueError, match="Invalid rounding mode 'up'"):
        T.ieee_add(1.0, 2.0, "up")  # outside a kernel too, as in the reference
    with pytest.raises(ValueError, match="Invalid rounding mode") as info:
        unary(lambda v: T.ieee_fsqrt(v, "bad"))
    assert "test_math_modes.py" in str(info.value)


def test_half_precision_has_round_to_nearest_only():
    for dtype in (T.float16, T.bfloat16):
        with pytest.raises(ValueError, match="Only rounding mode 'rn' is available for half"):
            binary(lambda a, b: T.ieee_add(a, b, "rz"), dtype)


def test_no_float64_reciprocal_square_root():
    with pytest.raises(TypeError, match="frsqrt is not supported for float64"):
        unary(T.ieee_frsqrt, T.float64)


def test_directed_rounding_of_a_sum_that_is_not_representable():
    tiny = 2.0 ** -30
    out = {m: cpu(binary(lambda a, b, m=m: T.ieee_add(a, b, m), n=2), f32(1, -1), f32(tiny, -tiny))
           for m in MODES}
    assert out["rn"].tolist() == [1, -1]
    assert out["rz"].tolist() == [1, -1]
    assert out["ru"].tolist() == [next_up(1), -1]
    assert out["rd"].tolist() == [1, -next_up(1)]


def test_subtraction_multiplication_and_division_round_as_asked():
    third = {m: cpu(binary(lambda a, b, m=m: T.ieee_fdiv(a, b, m), n=1), f32(1), f32(3)).item()
             for m in MODES}
    assert third["rd"] < 1 / 3 < third["ru"] and third["rz"] == third["rd"]
    assert third["ru"] == next_up(third["rd"]) and third["rn"] == float(np.float32(1 / 3))
    sub = cpu(binary(lambda a, b: T.ieee_sub(a, b, "ru"), n=1), f32(1), f32(2.0 ** -30)).item()
    assert sub == 1.0  # 1 - 2^-30 rounds up to 1
    big = cpu(binary(lambda a, b: T.ieee_mul(a, b, "rz"), n=1), f32(3e38), f32(10)).item()
    assert big == float(np.finfo(np.float32).max)
    assert math.isinf(cpu(binary(lambda a, b: T.ieee_mul(a, b), n=1), f32(3e38), f32(10)).item())


def test_results_into_the_subnormal_range():
    out = cpu(binary(lambda a, b: T.ieee_mul(a, b, "rn"), n=2),
              f32(2.0 ** -126, 2.0 ** -126), f32(2.0 ** -10, 2.0 ** -30))
    assert out.tolist() == [2.0 ** -136, 0.0]
    up = cpu(binary(lambda a, b: T.ieee_mul(a, b, "ru"), n=1), f32(2.0 ** -126), f32(2.0 ** -30))
    assert up.item() == 2.0 ** -149  # the smallest subnormal


def test_fused_multiply_add_rounds_once():
    # (1 + 2^-12)^2 - 1 = 2^-11 + 2^-24: a separate multiply would lose the 2^-24
    a = f32(1 + 2.0 ** -12)
    out = cpu(ternary(lambda x, y, z: T.ieee_fmaf(x, y, z, "rn"), n=1), a, a, f32(-1))
    assert out.item() == 2.0 ** -11 + 2.0 ** -24


def test_square_roots():
    x = f32(2.0)
    r = {m: cpu(unary(lambda v, m=m: T.ieee_fsqrt(v, m), n=1), x).item() for m in MODES}
    assert r["rd"] < math.sqrt(2) < r["ru"] and r["ru"] == next_up(r["rd"])
    assert r["rn"] == float(np.sqrt(np.float32(2)))
    exact = cpu(unary(lambda v: T.ieee_fsqrt(v, "ru"), n=1), f32(9.0)).item()
    assert exact == 3.0
    inv = cpu(unary(T.ieee_frsqrt, n=2), f32(4.0, 2.0)).tolist()
    assert inv[0] == 0.5 and inv[1] == float(np.float32(1 / math.sqrt(2)))


def test_special_values():
    inf, nan = float("inf"), float("nan")
    out = cpu(binary(lambda a, b: T.ieee_fdiv(a, b, "rz"), n=4), f32(1, -1, 0, inf),
              f32(0, 0, 0, 2)).tolist()
    assert out[0] == inf and out[1] == -inf and math.isnan(out[2]) and out[3] == inf
    assert math.isnan(cpu(unary(lambda v: T.ieee_fsqrt(v, "rd"), n=1), f32(-1)).item())
    zero = cpu(binary(lambda a, b: T.ieee_add(a, b, "rd"), n=2), f32(1, 0), f32(-1, 0)).tolist()
    assert math.copysign(1, zero[0]) < 0 and math.copysign(1, zero[1]) > 0  # IEEE 754 §6.3


@pytest.mark.parametrize("mode", MODES)
def test_random_float32_operations_bracket_the_exact_result(mode):
    rng = np.random.default_rng(3)
    a = torch.from_numpy(rng.standard_normal(64).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal(64).astype(np.float32))
    exact = a.double() * b.double()  # products of float32 values are exact in float64
    out = cpu(binary(lambda x, y: T.ieee_mul(x, y, mode)), a, b).double()
    lo = torch.from_numpy(np.nextafter(out.float().numpy(), -np.inf)).double()
    hi = torch.from_numpy(np.nextafter(out.float().numpy(), np.inf)).double()
    assert bool(((lo < exact) & (exact < hi)).all())  # within one ulp
    if mode == "ru":
        assert bool((out >= exact).all())
    if mode == "rd":
        assert bool((out <= exact).all())
    if mode == "rz":
        assert bool((out.abs() <= exact.abs()).all())
    if mode == "rn":
        assert bool((out == exact.float().double()).all())


@pytest.mark.parametrize("dtype", [T.float16, T.bfloat16, T.float64])
def test_other_dtypes_round_to_their_own_precision(dtype):
    rng = np.random.default_rng(5)
    a = torch.from_numpy(rng.standard_normal(64)).to(dtype.torch)
    b = torch.from_numpy(rng.standard_normal(64)).to(dtype.torch)
    out = cpu(binary(T.ieee_add, dtype), a, b)
    assert out.dtype == dtype.torch
    # a sum of two such values is exact in float64; rounding it once is the IEEE result
    assert torch.equal(out, (a.double() + b.double()).to(dtype.torch))


def test_round_exact_against_float_conversion():
    from fractions import Fraction

    for v in (1 / 3, 2.0 ** -140, 1e30, -7.123456789, 2.0 ** -20, 70000.0):
        assert round_exact(Fraction(v), "float32", "rn") == float(np.float32(v))
        if abs(v) < 65520:  # numpy warns on float16 overflow; round_exact gives inf
            assert round_exact(Fraction(v), "float16", "rn") == float(np.float16(v))
    assert round_exact(Fraction(70000), "float16", "rn") == math.inf
    assert round_exact(Fraction(70000), "float16", "rz") == 65504.0


@pytest.mark.parametrize("op,arity", [("ieee_add", 2), ("ieee_sub", 2), ("ieee_mul", 2),
                                      ("ieee_fdiv", 2), ("ieee_fmaf", 3), ("ieee_frcp", 1),
                                      ("ieee_fsqrt", 1)])
def test_cuda_intrinsics_by_dtype_and_mode(op, arity):
    make = {1: unary, 2: binary, 3: ternary}[arity]
    fn = getattr(T, op)
    f32_name = {"ieee_add": "__fadd", "ieee_sub": "__fsub", "ieee_mul": "__fmul",
                "ieee_fdiv": "__fdiv", "ieee_fmaf": "__fmaf", "ieee_frcp": "__frcp",
                "ieee_fsqrt": "__fsqrt"}[op]
    assert f"{f32_name}_rz(" in source(make(lambda *a: fn(*a, "rz")))
    assert "__d" in source(make(lambda *a: fn(*a, "ru"), T.float64)) or op == "ieee_fmaf"
    half_name = {"ieee_add": "__hadd", "ieee_sub": "__hsub", "ieee_mul": "__hmul",
                 "ieee_fdiv": "hdiv_rn", "ieee_fmaf": "hfma_rn", "ieee_frcp": "hrcp_rn",
                 "ieee_fsqrt": "hsqrt_rn"}[op]
    for dtype in (T.float16, T.bfloat16):  # round-to-nearest forms
        assert f"{half_name}(" in source(make(lambda *a: fn(*a), dtype))


@pytest.mark.parametrize("target", [SM90, {"kind": "cuda", "arch": "sm_75"}])
def test_builds_for_sm90_and_sm75(target):
    def every_op(x, y, z):
        return (T.ieee_fmaf(x, y, z) + T.ieee_add(x, y) + T.ieee_sub(x, y) + T.ieee_mul(x, y) +
                T.ieee_fdiv(x, y) + T.ieee_frcp(x) + T.ieee_fsqrt(y) + T.ieee_frsqrt(y) +
                T.tan(x) + T.abs(x) + T.round(x, "ties-away-from-zero") + T.round(x))

    for dtype in (T.bfloat16, T.float16, T.float32):
        kernel = tilelang.compile(ternary(every_op, dtype), out_idx=[-1], target=target)
        assert "hfma_rn(" in kernel.get_kernel_source() or dtype == T.float32
    kernel = tilelang.compile(unary(T.fast_rcp), out_idx=[-1], target=target)
    assert "fast_rcp" in kernel.get_kernel_source()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype,modes", [(T.float32, MODES), (T.float64, MODES),
                                         (T.float16, ("rn",)), (T.bfloat16, ("rn",))])
def test_gpu_matches_the_interpreter_bit_for_bit(dtype, modes):
    n = 1000
    gen = torch.Generator().manual_seed(11)
    a = torch.randn(n, generator=gen, dtype=torch.float64).to(dtype.torch)
    b = torch.randn(n, generator=gen, dtype=torch.float64).to(dtype.torch).abs() + 0.1
    c = torch.randn(n, generator=gen, dtype=torch.float64).to(dtype.torch)
    for mode in modes:
        progs = [(binary(lambda x, y, m=mode: T.ieee_add(x, y, m), dtype, n), (a, b)),
                 (binary(lambda x, y, m=mode: T.ieee_mul(x, y, m), dtype, n), (a, b)),
                 (binary(lambda x, y, m=mode: T.ieee_fdiv(x, y, m), dtype, n), (a, b)),
                 (ternary(lambda x, y, z, m=mode: T.ieee_fmaf(x, y, z, m), dtype, n), (a, b, c)),
                 (unary(lambda x, m=mode: T.ieee_fsqrt(x, m), dtype, n), (b,))]
        for prog, args in progs:
            want = cpu(prog, *args)
            got = tilelang.compile(prog, out_idx=[-1], target="cuda")(*[x.cuda() for x in args])
            assert torch.equal(got.cpu(), want), (dtype, mode)
