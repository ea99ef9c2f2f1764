"""`tilelang.ir.dtype`: names and aliases, sizes, predicates, conversions to numpy/torch/C, value
ranges, interning, and the typed constants/casts built by calling a dtype (`T.float16(0.1)`)."""

import pickle
import warnings

import numpy as np
import pytest
import torch

import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.ir.dtype import DType, canonical_dtype_name, dtype, is_dtype_like

# name -> (bits, bytes, is_float, is_int, is_bool, signed int, unsigned)
SCALARS = {
    "float16": (16, 2, True, False, False, False, False),
    "bfloat16": (16, 2, True, False, False, False, False),
    "float32": (32, 4, True, False, False, False, False),
    "float64": (64, 8, True, False, False, False, False),
    "float8_e4m3": (8, 1, True, False, False, False, False),
    "float8_e5m2": (8, 1, True, False, False, False, False),
    "int8": (8, 1, False, True, False, True, False),
    "int16": (16, 2, False, True, False, True, False),
    "int32": (32, 4, False, True, False, True, False),
    "int64": (64, 8, False, True, False, True, False),
    "uint8": (8, 1, False, True, False, False, True),
    "uint32": (32, 4, False, True, False, False, True),
    "bool": (8, 1, False, False, True, False, False),
}


@pytest.mark.parametrize("name", sorted(SCALARS))
def test_scalar_names_sizes_and_predicates(name):
    d = DType(name)
    bits, nbytes, is_float, is_int, is_bool, signed, unsigned = SCALARS[name]
    # the text is the torch/reference spelling: float8_e4m3 is torch's float8_e4m3fn
    text = "float8_e4m3fn" if name == "float8_e4m3" else name
    assert (d.name, d.base, d.lanes, str(d)) == (name, name, 1, text)
    assert isinstance(d, str) and d == text and d == name
    assert (d.bits, d.bytes) == (bits, nbytes)
    assert (d.is_float, d.is_int, d.is_bool) == (is_float, is_int, is_bool)
    assert (d.is_signed_int, d.is_unsigned) == (signed, unsigned)
    assert d.is_float8 == name.startswith("float8")
    assert not d.is_handle
    assert d.element is d


def test_handle():
    h = DType("handle")
    assert h.is_handle and h.bits == 64 and not (h.is_int or h.is_float or h.is_bool)
    assert h.ctype == "void*"


@pytest.mark.parametrize("alias,name", [
    ("fp16", "float16"), ("bf16", "bfloat16"), ("float", "float32"), ("fp32", "float32"),
    ("double", "float64"), ("int", "int32"), ("long", "int64"), ("short", "int16"),
    ("uint", "uint32"), ("uchar", "uint8"), ("char", "int8"), ("boolean", "bool"),
    ("e4m3", "float8_e4m3"), ("float8_e4m3fn", "float8_e4m3"),
    ("e5m2", "float8_e5m2"), ("  float16 ", "float16"),
])
def test_aliases_canonicalise_to_one_interned_object(alias, name):
    assert canonical_dtype_name(alias) == name
    assert DType(alias) is DType(name) is dtype(name)


@pytest.mark.parametrize("bad", ["half", "float17", "int7", "", "float16x", "x4", "float16x0",
                                 "float16xx2"])
def test_unknown_names_are_rejected(bad):
    with pytest.raises(ValueError, match="unknown dtype"):
        DType(bad)
    assert not is_dtype_like(bad)


def test_vector_types():
    v = DType("float16x4")
    assert (v.base, v.lanes, v.bits, v.bytes) == ("float16", 4, 16, 8)
    assert v.is_float and v.element is DType("float16")
    assert v.with_lanes(1) is DType("float16") and DType("float16").with_lanes(4) is v
    assert DType("int8x16").bytes == 16 and DType("int8x16").is_int
    assert v.ctype == "half_t"  # the element's C name


def test_vector_spellings_are_canonical():
    # Regression: "float16x1" used to be a second, distinct float16 and "x0" a 0-byte type
    assert DType("float16x1") is DType("float16")
    assert DType("int8x04") is DType("int8x4")
    assert DType("float16x1") == DType("float16")


def test_python_numpy_and_torch_types():
    assert DType(float) is DType("float32") and DType(int) is DType("int32")
    assert DType(bool) is DType("bool")
    assert DType(np.float16) is DType("float16") and DType(np.dtype("uint8")) is DType("uint8")
    assert DType(np.int64) is DType("int64")
    assert DType(torch.bfloat16) is DType("bfloat16")
    assert DType(torch.float8_e4m3fn) is DType("float8_e4m3") == "float8_e4m3fn"
    assert DType(torch.float8_e5m2) is DType("float8_e5m2")
    assert DType(torch.int16) is DType("int16") and DType(torch.bool) is DType("bool")
    with pytest.raises(ValueError):
        DType(np.complex64)
    with pytest.raises(ValueError):
        DType(torch.complex64)


def test_conversions_to_other_type_systems():
    assert DType("float16").numpy == np.float16 and DType("int8").numpy == np.int8
    # no numpy type: the interpreter stores these in float32
    for name in ("bfloat16", "float8_e4m3", "float8_e5m2"):
        assert DType(name).numpy == np.float32
    assert DType("bfloat16").torch is torch.bfloat16
    assert DType("float8_e4m3").torch is torch.float8_e4m3fn
    assert DType("uint8").torch is torch.uint8
    assert [DType(n).ctype for n in ("int32", "uint64", "bfloat16", "float8_e5m2", "bool")] == [
        "int", "uint64_t", "bfloat16_t", "fp8_e5_t", "bool"]


def test_value_ranges():
    assert (DType("int8").min_value(), DType("int8").max_value()) == (-128, 127)
    assert (DType("uint8").min_value(), DType("uint8").max_value()) == (0, 255)
    assert DType("int32").max_value() == 2**31 - 1 and DType("uint32").max_value() == 2**32 - 1
    assert DType("int64").min_value() == -2**63
    assert DType("float16").max_value() == 65504.0
    assert DType("float8_e4m3").max_value() == 448.0
    assert DType("float8_e5m2").max_value() == 57344.0
    # the finite extreme, not -inf (SEMANTICS §10)
    assert DType("float32").min_value() == float(np.float32(-3.4028235e38))
    assert DType("bool").max_value() is True and DType("bool").min_value() is False


def test_equality_hash_and_pickle():
    f16 = DType("float16")
    assert f16 == "float16" and f16 == "fp16" and f16 == torch.float16
    assert f16 != "float32" and f16 != "not a type" and f16 != 3
    assert not (f16 == object())
    # hash agrees with the name, so a dict keyed by dtypes answers string lookups
    assert hash(f16) == hash("float16") and {f16: 1}["float16"] == 1
    assert pickle.loads(pickle.dumps(f16)) is f16
    assert repr(f16) == "dtype('float16')"


def test_calling_a_dtype_builds_constants_and_casts():
    c = T.float16(0.1)
    assert isinstance(c, ir.Const) and c.dtype is DType("float16")
    assert c.value == float(np.float16(0.1)) != 0.1  # rounded to float16
    assert T.float32(3).value == 3.0 and isinstance(T.float32(3).value, float)
    assert T.int32(2.7).value == 2 and T.int32(-2.7).value == -2  # truncation toward zero
    assert T.int8(200).value == -56 and T.uint8(-1).value == 255  # C conversion (wraps)
    assert T.bool(3).value is True
    x = ir.Var("x", DType("int32"))
    cast = T.float32(x)
    assert isinstance(cast, ir.Cast) and cast.value is x and cast.dtype is DType("float32")
    assert T.int32(x) is x  # same type: no cast
    v = T.float32()  # a fresh variable, as the reference's TVMScript makes
    assert isinstance(v, ir.Var) and v.dtype is DType("float32")
    assert (T.int32() & 0x7FFFFFFF).dtype is DType("int32")
    pair = T.float16x2(x, 1.5)
    assert [str(lane.dtype) for lane in pair] == ["float16", "float16"]


def test_bfloat16_and_float8_constants_round():
    assert T.bfloat16(1.00390625).value == 1.0  # 1 + 2^-8 rounds to even in bfloat16
    assert T.bfloat16(1.0078125).value == 1.0078125  # 1 + 2^-7 is representable
    assert T.float8_e4m3(0.3).value == 0.3125
    with warnings.catch_warnings():  # numpy may warn about the overflow
        warnings.simplefilter("ignore")
        assert T.float16(70000.0).value == float("inf")


def test_a_float32_literal_past_its_range_is_an_error_not_infinity():
    import tilelang.language as T
    from tilelang.ir import nodes as ir

    with pytest.raises(ValueError, match="exceeds maximum of float32"):
        ir.const(1e300, "float32")
    assert ir.const(float("inf"), "float32").value == float("inf")
    assert ir.const(3.0e38, "float32").value == pytest.approx(3.0e38, rel=1e-6)
    with pytest.raises(ValueError, match="exceeds maximum of float32") as info:
        @T.prim_func
        def kernel(A: T.Tensor((1,), T.float32)):
            with T.Kernel(1):
                value = T.alloc_var(T.float32, init=-1e300)
                A[0] = value
    assert "test_dtype.py" in str(info.value)
