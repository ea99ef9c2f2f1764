"""Numeric conversions of the CPU interpreter.

The interpreter stores every buffer as a numpy array of `DType.numpy`: native numpy types for
float16/32/64 and the integers, and **float32 for bfloat16 and the float8 types**, whose values
are kept rounded to the narrow format on every store (`round_to`). This module guarantees:

* `round_to(arr, dtype)`: nearest representable bfloat16 / float8_e4m3 (fn: max 448, no inf,
  saturating) / float8_e5m2 value, round-to-nearest-even, exactly as torch's `.to(dtype)` on the
  CPU (NaN stays NaN; e4m3fn saturates to +-448, also for inf; e5m2 overflows to inf).
* `convert(value, src, dst)`: C conversion semantics between any two dtypes (float->int
  truncates toward zero and saturates, NaN -> 0, as PTX `cvt.rzi`; int->int wraps).
* `tf32(arr)`: float32 inputs of a TF32 tensor-core gemm (10 mantissa bits, ties away).
* bit-level views for `T.reinterpret`, poison values for fresh memory.

Scalars in and out are numpy scalars (`np.generic`); arrays stay arrays.
"""

from __future__ import annotations

import numpy as np

from ..ir.dtype import DType, round_to
from ..ir.dtype import FP8_FORMATS as _FP8
from ..ir.dtype import as_array as _as_array, c_contiguous as _contig

__all__ = ["round_to", "convert", "tf32", "to_storage", "poison_value", "reinterpret_bits",
           "const_value", "NARROW_FLOATS", "pack_fp4", "unpack_fp4", "pack_nibbles",
           "unpack_nibbles", "wrap_sub_byte"]

NARROW_FLOATS = frozenset({"bfloat16", "float8_e4m3", "float8_e5m2", "float8_e8m0fnu",
                           "float4_e2m1fn"})

# the value of each float4_e2m1fn code (sign in bit 3)
_FP4_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                        -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], np.float32)


def unpack_fp4(packed: np.ndarray) -> np.ndarray:
    """float32 values of the float4_e2m1fn elements packed in a uint8 array, two to a byte
    (even index in the low nibble): the last dimension doubles."""
    lo, hi = _FP4_VALUES[packed & 0xF], _FP4_VALUES[packed >> 4]
    return np.stack([lo, hi], axis=-1).reshape(packed.shape[:-1] + (2 * packed.shape[-1],))


def pack_fp4(values: np.ndarray) -> np.ndarray:
    """The inverse of `unpack_fp4`: uint8 bytes of float4_e2m1fn values (rounded first)."""
    v = round_to(np.asarray(values, np.float32), DType("float4_e2m1fn"))
    codes = np.searchsorted(_FP4_VALUES[:8], np.abs(v)).astype(np.uint8)
    codes |= np.signbit(v).astype(np.uint8) << 3
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def wrap_sub_byte(a: np.ndarray, dst: DType) -> np.ndarray:
    """Integers already in `dst`'s numpy storage reduced to its bits (int4: -8..7 with two's
    complement wrap-around, uint4: 0..15); other types unchanged."""
    if not dst.is_int or dst.bits >= 8:
        return a
    mask = (1 << dst.bits) - 1
    low = np.asarray(a).astype(np.int32) & mask
    if dst.kind == "i":
        low = low - ((low >> (dst.bits - 1)) << dst.bits)  # sign-extend the top bit
    return low.astype(dst.numpy)


def unpack_nibbles(packed: np.ndarray, dtype: DType) -> np.ndarray:
    """The int4 / uint4 values packed in a uint8 array two to a byte (even index in the low
    nibble), one value per element of `dtype`'s storage: the last dimension doubles."""
    both = np.stack([packed & 0xF, packed >> 4], axis=-1)
    values = both.reshape(packed.shape[:-1] + (2 * packed.shape[-1],))
    return wrap_sub_byte(values, dtype)


def pack_nibbles(values: np.ndarray) -> np.ndarray:
    """The inverse of `unpack_nibbles`: uint8 bytes of 4-bit integer values."""
    codes = np.asarray(values).astype(np.int32).astype(np.uint8) & 0xF
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def tf32(arr) -> np.ndarray:
    """float32 -> TF32 (10 explicit mantissa bits), round to nearest, ties away from zero, as
    `cvt.rna.tf32.f32`; inf and NaN pass through."""
    a = _contig(arr, np.float32)
    bits = a.view(np.uint32)
    out = ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
    special = ~np.isfinite(a)
    if special.any():
        out = np.where(special, a, out)
    return out


def _float_to_int(a, dst: DType):
    f = np.trunc(np.asarray(a, dtype=np.float64))
    f = np.where(np.isnan(f), 0.0, f)
    lo, hi = dst.min_value(), dst.max_value()
    too_big = f >= float(hi)
    res = np.clip(f, float(lo), float(hi))
    res = np.where(too_big, 0.0, res).astype(dst.numpy)
    if too_big.any():
        res = np.where(too_big, dst.numpy.type(hi), res)
    return res


def convert(value, src: DType, dst: DType):
    """Convert interpreter values of dtype `src` to dtype `dst` (C semantics)."""
    if src is dst:
        return value
    a, scalar = _as_array(value)
    if dst.is_bool:
        out = a != 0
    elif dst.is_int:
        if src.is_float:
            out = _float_to_int(a, dst)
        else:
            out = a.astype(dst.numpy)
        out = wrap_sub_byte(out, dst)
    elif dst.is_float:
        if dst.name in NARROW_FLOATS:
            if src.name == "bfloat16" and dst.name == "bfloat16":
                out = a
            else:
                out = round_to(a.astype(np.float32), dst)
        else:
            out = a.astype(dst.numpy)
    elif dst.is_handle:
        out = a
    else:
        raise TypeError(f"cannot convert {src} to {dst}")
    return out[()] if scalar else out


def to_storage(value, dtype: DType):
    """Coerce a value already in `dtype`'s value domain to its numpy storage type."""
    npdt = dtype.numpy
    if isinstance(value, np.ndarray):
        return value if value.dtype == npdt else value.astype(npdt)
    if isinstance(value, np.generic) and value.dtype == npdt:
        return value
    return np.asarray(value).astype(npdt)[()]


def const_value(value, dtype: DType):
    """The numpy scalar of a Const node."""
    if dtype.is_handle or dtype.name == "void":
        return value
    if dtype.is_float and dtype.name in NARROW_FLOATS:
        return round_to(np.float32(value), dtype)
    if dtype.is_int:
        return np.array(int(value)).astype(dtype.numpy)[()]
    return dtype.numpy.type(value)


def poison_value(dtype: DType):
    """What fresh shared/fragment/local memory holds: NaN for floats, a recognisable
    garbage value for integers (so that reading before writing shows)."""
    if dtype.is_float:
        return np.nan
    if dtype.is_bool:
        return True
    return np.array(-123456789, dtype=np.int64).astype(dtype.numpy)[()]


# ---- bit views (T.reinterpret) ----------------------------------------------------------------

def _fp8_table(name: str) -> np.ndarray:
    """The float value of each of the 256 codes of a float8 format."""
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    if name == "float8_e4m3":
        e, m, bias, mb = (codes >> 3) & 0xF, codes & 0x7, 7, 3
    else:
        e, m, bias, mb = (codes >> 2) & 0x1F, codes & 0x3, 15, 2
    val = np.where(e == 0, m / 2.0**mb * 2.0**(1 - bias), (1 + m / 2.0**mb) * 2.0**(e - bias))
    val = sign * val
    if name == "float8_e4m3":
        val = np.where((e == 15) & (m == 7), np.nan, val)
    else:
        val = np.where(e == 31, np.where(m == 0, sign * np.inf, np.nan), val)
    return val.astype(np.float32)


_TABLES: dict = {}


def _table(name):
    t = _TABLES.get(name)
    if t is None:
        t = _TABLES[name] = _fp8_table(name)
    return t


def _to_bits(a, src: DType) -> np.ndarray:
    """Raw bit patterns (unsigned ints of src's width) of interpreter values."""
    if src.name == "float8_e8m0fnu":  # exact powers of two (rounded when stored), or NaN
        a = np.asarray(a, dtype=np.float32)
        _, e = np.frexp(np.where(np.isnan(a), 1.0, a))
        return np.where(np.isnan(a), 255, e - 1 + 127).astype(np.uint8)
    if src.name == "bfloat16":
        return (_contig(a, np.float32).view(np.uint32) >> 16).astype(
            np.uint16)
    if src.name in _FP8:
        table = _table(src.name)
        a = np.asarray(a, dtype=np.float32)
        pos = table[:128]
        valid = np.nonzero(~np.isnan(pos))[0]  # positive codes, ascending in value
        idx = np.clip(np.searchsorted(pos[valid], np.abs(a)), 0, len(valid) - 1)
        codes = valid[idx].astype(np.uint8)
        codes = np.where(np.signbit(a), codes | np.uint8(0x80), codes).astype(np.uint8)
        return np.where(np.isnan(a), np.uint8(0x7F), codes).astype(np.uint8)
    width = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[src.bits]
    return _contig(a, src.numpy).view(width)


def _from_bits(bits, dst: DType):
    if dst.name == "float8_e8m0fnu":
        return round_to(np.ldexp(np.float32(1.0), bits.astype(np.int64) - 127), dst)
    if dst.name == "bfloat16":
        return (bits.astype(np.uint32) << 16).view(np.float32)
    if dst.name in _FP8:
        return _table(dst.name)[bits.astype(np.int64)]
    return bits.view(dst.numpy)


def reinterpret_bits(value, src: DType, dst: DType):
    """View the bits of `value` (dtype src) as dtype dst of the same width."""
    a, scalar = _as_array(value)
    out = _from_bits(_contig(_to_bits(a, src)), dst)
    return out[()] if scalar else out
