"""Numerics of the interpreter: rounding to narrow floats against torch, C conversions, TF32,
bit reinterpretation, and host-side integer evaluation."""

import numpy as np
import pytest
import torch

from tilelang.interp.evaluate import eval_int
from tilelang.interp.numerics import convert, reinterpret_bits, round_to, tf32
from tilelang.ir import nodes as ir
from tilelang.ir.dtype import DType

NARROW = [("bfloat16", torch.bfloat16), ("float8_e4m3", torch.float8_e4m3fn),
          ("float8_e5m2", torch.float8_e5m2)]

SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 448.0, 464.0, 479.9, 480.0,
                    500.0, 57344.0, 61439.0, 61440.0, 2.0**-9, 2.0**-10, 3 * 2.0**-11,
                    2.0**-16, 2.0**-17, 1.5 * 2.0**-17, 3.3895e38, 3.4e38, 1e-40],
                   np.float32)


def _values(rng):
    scales = [1e-7, 1e-4, 1e-2, 1.0, 30.0, 1e3, 6e4, 1e6, 1e30]
    parts = [rng.standard_normal(20000).astype(np.float32) * s for s in scales]
    # ties: exact midpoints between neighbouring representable values are the hard cases
    mids = (np.arange(-300, 300, dtype=np.float32) + 0.5) * np.float32(2.0**-3)
    return np.concatenate(parts + [SPECIAL, mids, -SPECIAL])


@pytest.mark.parametrize("name,tdt", NARROW)
def test_round_to_matches_torch(rng, name, tdt):
    x = _values(rng)
    ours = round_to(x, DType(name))
    ref = torch.from_numpy(x).to(tdt).float().numpy()
    same = (ours == ref) | (np.isnan(ours) & np.isnan(ref))
    assert same.all(), (x[~same][:8], ours[~same][:8], ref[~same][:8])
    assert ours.dtype == np.float32


def test_round_to_scalar_and_idempotent(rng):
    x = rng.standard_normal(1000).astype(np.float32)
    for name, _ in NARROW:
        once = round_to(x, DType(name))
        assert np.array_equal(round_to(once, DType(name)), once, equal_nan=True)
    assert float(round_to(np.float32(1.00390625), DType("bfloat16"))) == 1.0  # tie to even


@pytest.mark.parametrize("name,tdt", NARROW)
def test_reinterpret_bits_matches_torch(rng, name, tdt):
    x = _values(rng)
    x = x[~np.isnan(x)]
    rounded = round_to(x, DType(name))
    width = "uint8" if "float8" in name else "uint16"
    ours = reinterpret_bits(rounded, DType(name), DType(width))
    tview = torch.uint8 if "float8" in name else torch.int16
    ref = torch.from_numpy(x).to(tdt).view(tview).numpy().view(np.dtype(width))
    assert np.array_equal(ours, ref)
    back = reinterpret_bits(ours, DType(width), DType(name))
    assert np.array_equal(back, rounded)


def test_reinterpret_native_types():
    v = reinterpret_bits(np.float32(1.0), DType("float32"), DType("int32"))
    assert v == 0x3F800000
    h = reinterpret_bits(np.array([0x3C00], np.uint16), DType("uint16"), DType("float16"))
    assert h[0] == np.float16(1.0)


def test_float_to_int_truncates_and_saturates():
    x = np.array([2.7, -2.7, 0.5, -0.5, 1e10, -1e10, np.nan, np.inf, -np.inf], np.float32)
    got = convert(x, DType("float32"), DType("int32"))
    assert got.dtype == np.int32
    assert got.tolist() == [2, -2, 0, 0, 2**31 - 1, -2**31, 0, 2**31 - 1, -2**31]
    assert convert(x, DType("float32"), DType("int8")).tolist() == [2, -2, 0, 0, 127, -128, 0,
                                                                    127, -128]
    assert convert(np.float16(3.9), DType("float16"), DType("int64")) == 3


def test_int_conversions_wrap_and_float16_rounds(rng):
    assert convert(np.array([300, -129]), DType("int64"), DType("int8")).tolist() == [44, 127]
    x = rng.standard_normal(1000).astype(np.float32) * 100
    assert np.array_equal(convert(x, DType("float32"), DType("float16")), x.astype(np.float16))
    b = convert(x, DType("float32"), DType("bfloat16"))
    assert np.array_equal(b, torch.from_numpy(x).bfloat16().float().numpy())
    assert convert(np.int32(5), DType("int32"), DType("bool")) == np.True_


def test_tf32_keeps_ten_mantissa_bits(rng):
    x = rng.standard_normal(10000).astype(np.float32)
    t = tf32(x)
    bits = t.view(np.uint32)
    assert not (bits & 0x1FFF).any()
    assert np.all(np.abs(t - x) <= np.abs(x) * 2.0**-11 + 1e-38)
    # ties go away from zero: 1 + 2**-11 lies halfway between two tf32 values
    assert tf32(np.array([1 + 2.0**-11], np.float32))[0] == np.float32(1 + 2.0**-10)
    assert np.isnan(tf32(np.array([np.nan], np.float32))[0])


def test_eval_int_shape_expressions():
    m, n = ir.Var("m"), ir.Var("n")
    e = (m + 31) // 32
    assert eval_int(e, {m: 100}) == 4
    assert eval_int(ir.binary("floormod", m - 100, 7), {m: 3}) == 1  # floor: -97 % 7
    assert eval_int(ir.binary("truncdiv", m, 2), {m: -7}) == -3
    assert eval_int(ir.binary("truncmod", m, 2), {m: -7}) == -1
    assert eval_int(ir.binary("max", m, n) * 2, {m: 3, n: 5}) == 10
    assert eval_int(ir.select(m > 2, m, n), {m: 3, n: 9}) == 3
    assert eval_int(64, {}) == 64


def test_eval_int_unbound_var_names_it():
    m, k = ir.Var("m"), ir.Var("k_dim")
    with pytest.raises(NameError, match="k_dim"):
        eval_int(m + k, {m: 1})
