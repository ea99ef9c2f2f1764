"""Data types of the tile IR.

A `DType` is an interned, immutable description of a scalar type (and optionally a vector of
`lanes` of it). The same object is what users write as `T.float16`: calling it builds a typed
constant or a cast, and it serves as the annotation of scalar kernel parameters.

As in the reference (where `T.float16` is a `tvm.DataType`, itself a `str`), a `DType` is a
`str` whose text is the type's name: `getattr(torch, T.bfloat16)`, `T.float16 == "float16"`,
`{"float16": ...}[T.float16]` and `np.zeros(4, T.float32)` all work. There is one object per
type (`.name` is the key the compiler uses); its text is the spelling torch and the reference
print, which differs from `.name` only for E4M3 (`.name` "float8_e4m3", text "float8_e4m3fn",
the torch type). Equality is semantic: a dtype equals every spelling of its type.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["DType", "dtype", "canonical_dtype_name", "DTYPE_ALIASES", "STORABLE",
           "PACKED_GLOBAL", "PACKED_SHARED", "PACKED_INTS"]

# name -> (kind, bits); kind: f = float, i = signed int, u = unsigned int, b = bool, h = handle
_KINDS = {
    "bool": ("b", 8),
    "int8": ("i", 8), "int16": ("i", 16), "int32": ("i", 32), "int64": ("i", 64),
    "uint8": ("u", 8), "uint16": ("u", 16), "uint32": ("u", 32), "uint64": ("u", 64),
    "float16": ("f", 16), "bfloat16": ("f", 16), "float32": ("f", 32), "float64": ("f", 64),
    "float8_e4m3": ("f", 8), "float8_e5m2": ("f", 8),
    "handle": ("h", 64), "void": ("v", 0),
    # Types the reference names that have no storage here: usable as values (comparisons,
    # `.bits`, dictionary keys), refused as the element type of a buffer (see STORABLE).
    "int4": ("i", 4), "uint4": ("u", 4), "int2": ("i", 2), "uint2": ("u", 2),
    "int1": ("i", 1), "uint1": ("u", 1),
    "float4_e2m1fn": ("f", 4), "float6_e2m3fn": ("f", 6), "float6_e3m2fn": ("f", 6),
    "float8_e8m0fnu": ("f", 8),
    # 8-bit floats of other encodings than NVIDIA's E4M3 / E5M2 (the "fnuz" ones of AMD GPUs
    # have another exponent bias, so they are types of their own), and the reference's
    # byte-per-value FP4 staging type
    "float8_e4m3fnuz": ("f", 8), "float8_e5m2fnuz": ("f", 8), "float8_e3m4": ("f", 8),
    "float8_e4m3b11fnuz": ("f", 8), "float4_e2m1_unpacked": ("f", 8),
}

# Element types a buffer may have (numpy storage in the interpreter, a C type in CUDA).
STORABLE = frozenset({
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "float8_e4m3", "float8_e5m2", "float8_e8m0fnu",
    "handle"})

# Sub-byte element types of global tensors (kernel parameters), packed two to a byte as torch
# byte tensors carry them (jit/packed.py); element loads and stores address one nibble.
PACKED_GLOBAL = frozenset({"float4_e2m1fn", "int4", "uint4"})
# Sub-byte integers, which shared memory also holds packed two to a byte (the CUDA path works
# on their bytes: transform/pack_sub_byte.py); registers hold no packed types.
PACKED_INTS = frozenset({"int4", "uint4"})
PACKED_SHARED = PACKED_INTS

# Spellings accepted for dtypes (strings); "half" is deliberately not one (the reference rejects it).
DTYPE_ALIASES = {
    "float": "float32", "double": "float64", "int": "int32", "long": "int64", "short": "int16",
    "uint": "uint32", "ulong": "uint64", "fp16": "float16", "bf16": "bfloat16",
    "fp32": "float32", "fp64": "float64",
    "float8_e4m3fn": "float8_e4m3", "e4m3": "float8_e4m3",
    "e5m2": "float8_e5m2", "uchar": "uint8", "char": "int8",
    "boolean": "bool",
    # TF32 is float32 storage that tensor cores read with a 10-bit mantissa, which is what a
    # float32 T.gemm already does (the reference too: float32 operands with a float32
    # accumulator issue tf32 mma); so T.tfloat32 is T.float32.
    "tfloat32": "float32", "custom[tfloat32]": "float32",
    "e4m3_float8": "float8_e4m3", "e5m2_float8": "float8_e5m2",
    "custom[float4_e2m1_unpacked]8": "float4_e2m1_unpacked",
}

# The text of a dtype, where it is not its name: the torch / reference spelling.
_TEXT = {"float8_e4m3": "float8_e4m3fn",
         "float4_e2m1_unpacked": "custom[float4_e2m1_unpacked]8"}

_C_NAMES = {
    # 64-bit integers by their <cstdint> names: the header's functions (mbarriers, TMA) take
    # uint64_t*, which is `unsigned long` under nvcc and `unsigned long long` under NVRTC
    "bool": "bool", "int8": "signed char", "int16": "short", "int32": "int", "int64": "int64_t",
    "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
    "uint64": "uint64_t", "float16": "half_t", "bfloat16": "bfloat16_t",
    "float32": "float", "float64": "double", "float8_e4m3": "fp8_e4_t", "float8_e5m2": "fp8_e5_t",
    "float4_e2m1fn": "fp4_e2_t", "float8_e8m0fnu": "fp8_e8_t",
    # a value of a packed 4-bit integer, once loaded, is a byte in a register
    "int4": "signed char", "uint4": "unsigned char",
    "handle": "void*", "void": "void",
}

_NUMPY = {
    "bool": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
    "float16": np.float16, "float32": np.float32, "float64": np.float64,
    # No numpy type: the interpreter keeps these in float32 and rounds on every store.
    "bfloat16": np.float32, "float8_e4m3": np.float32, "float8_e5m2": np.float32,
    "float4_e2m1fn": np.float32, "float8_e8m0fnu": np.float32,
    # one value a byte: the interpreter unpacks packed tensors (interp/adapter.py)
    "int4": np.int8, "uint4": np.uint8,
    # a pointer (an address) is a 64-bit integer
    "handle": np.int64,
}

_TORCH_NAMES = {
    "bool": "bool", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float64": "float64",
    "float8_e4m3": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
    # what torch stores the reference's sub-byte types in (its `as_torch()`)
    "int4": "int8", "uint4": "uint8", "float8_e8m0fnu": "float8_e8m0fnu",
    "float8_e4m3fnuz": "float8_e4m3fnuz", "float8_e5m2fnuz": "float8_e5m2fnuz",
}

# DLPack type codes (tvm_ffi.dtype.type_code)
_TYPE_CODES = {"i": 0, "u": 1, "f": 2, "h": 3, "b": 6, "v": 0}
_SPECIAL_CODES = {"bfloat16": 4, "float8_e4m3": 10, "float8_e5m2": 12, "float8_e8m0fnu": 14,
                  "float6_e2m3fn": 15, "float6_e3m2fn": 16, "float4_e2m1fn": 17,
                  "float4_e2m1_unpacked": 131}  # a TVM custom type code


def canonical_dtype_name(value) -> str:
    """The canonical name of anything that denotes a dtype: DType, string, torch or numpy dtype."""
    if isinstance(value, DType):
        return value.name
    if isinstance(value, str):
        name = value.strip()
        name = DTYPE_ALIASES.get(name, name)
        if name in _KINDS:
            return name
        base, _, lanes = name.rpartition("x")
        base = DTYPE_ALIASES.get(base, base)
        if base in _KINDS and lanes.isdigit() and int(lanes) >= 1:
            # one spelling per type: "float16x1" is float16, "int8x04" is int8x4
            return base if int(lanes) == 1 else f"{base}x{int(lanes)}"
        raise ValueError(f"unknown dtype {value!r}")
    if value is float:
        return "float32"
    if value is int:
        return "int32"
    if value is bool:
        return "bool"
    mod = type(value).__module__
    if mod.startswith("tilelang"):  # a kernel value (its `.dtype` would fool numpy)
        raise ValueError(f"unknown dtype {value!r}")
    if mod.startswith("torch"):
        tname = str(value).replace("torch.", "")
        for ours, theirs in _TORCH_NAMES.items():
            if theirs == tname and ours in STORABLE:
                return ours
        if tname == "float4_e2m1fn_x2":  # torch's packed pair of FP4 values
            return "float4_e2m1fnx2"
        tname = DTYPE_ALIASES.get(tname, tname)
        if tname in _KINDS:
            return tname
        raise ValueError(f"unsupported torch dtype {value}")
    try:
        npd = np.dtype(value)
    except TypeError:
        raise ValueError(f"unknown dtype {value!r}") from None
    for ours, theirs in _NUMPY.items():
        if theirs == npd.type and ours not in ("bfloat16", "float8_e4m3", "float8_e5m2",
                                               "float8_e8m0fnu", "handle"):
            return ours
    raise ValueError(f"unsupported numpy dtype {npd}")


class DType(str):
    """A scalar (or short vector) type. Interned: `DType('float16') is DType('float16')`;
    a `str` of its torch/reference spelling (see the module docstring)."""

    _interned: dict = {}

    def __new__(cls, name="float32"):
        if type(name) is DType:
            return name
        obj = cls._interned.get(name) if type(name) is str else None
        if obj is not None:
            return obj
        canon = canonical_dtype_name(name)
        obj = cls._interned.get(canon)
        if obj is None:
            base, lanes = canon, 1
            if canon not in _KINDS:
                base, _, lane_text = canon.rpartition("x")
                lanes = int(lane_text)
            text = _TEXT.get(base, base) + (f"x{lanes}" if lanes > 1 else "")
            obj = str.__new__(cls, text)
            obj.name, obj.base, obj.lanes = canon, base, lanes
            obj.kind, obj.bits = _KINDS[base]
            cls._interned[canon] = obj
        if type(name) is str:
            cls._interned[name] = obj  # later lookups of this spelling skip canonicalising
        return obj

    def __reduce__(self):
        return (DType, (self.name,))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    # ----- classification -------------------------------------------------------------------
    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        """Signed or unsigned integer (not bool)."""
        return self.kind in "iu"

    @property
    def is_signed_int(self) -> bool:
        return self.kind == "i"

    @property
    def is_unsigned(self) -> bool:
        return self.kind == "u"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def is_handle(self) -> bool:
        return self.kind == "h"

    @property
    def is_float8(self) -> bool:
        return self.base.startswith("float8")

    @property
    def storable(self) -> bool:
        """Whether buffers of this element type exist here (no sub-byte storage)."""
        return self.base in STORABLE

    @property
    def bytes(self) -> int:
        return max(1, self.bits // 8) * self.lanes

    @property
    def element(self) -> "DType":
        return DType(self.base)

    def with_lanes(self, lanes: int) -> "DType":
        return DType(self.base if lanes == 1 else f"{self.base}x{lanes}")

    # ----- the reference's `tvm.DataType` / `tilelang.language.dtypes.dtype` surface ---------
    @property
    def itemsize(self) -> int:
        """Bytes of one value (all lanes), rounded up for sub-byte types."""
        return (self.bits * self.lanes + 7) // 8

    @property
    def type_code(self) -> int:
        """The DLPack type code (int 0, uint 1, float 2, handle 3, bfloat 4, bool 6, ...)."""
        return _SPECIAL_CODES.get(self.base, _TYPE_CODES[self.kind])

    def as_torch(self):
        """The torch dtype of tensors holding this type (`None` for `handle`); sub-byte integer
        types are stored one value per byte (int4 -> torch.int8), as in the reference."""
        if self.is_handle:
            return None
        import torch

        if self.base == "float4_e2m1fn" and self.lanes <= 2:
            # FP4 is stored two values a byte: torch's float4_e2m1fn_x2 where torch has it
            # (the reference's storage dtype), else int8 bytes for a single value
            packed = getattr(torch, "float4_e2m1fn_x2", None)
            if packed is not None or self.lanes == 1:
                return packed if packed is not None else torch.int8
        tname = _TORCH_NAMES.get(self.base)
        t = getattr(torch, tname, None) if tname is not None and self.lanes == 1 else None
        if t is None:
            raise ValueError(f"dtype {self} has no torch counterpart")
        return t

    def is_float4_e2m1fn(self) -> bool:
        return self.base == "float4_e2m1fn"

    def is_float4_e2m1_unpacked(self) -> bool:
        return self.base == "float4_e2m1_unpacked"

    def is_float4(self) -> bool:
        return self.base in ("float4_e2m1fn", "float4_e2m1_unpacked")

    # ----- conversions to other type systems -----------------------------------------------
    @property
    def numpy(self):
        """The numpy dtype that stores values of this type in the interpreter."""
        return np.dtype(_NUMPY[self.base])

    @property
    def torch(self):
        import torch

        return getattr(torch, _TORCH_NAMES[self.base])

    @property
    def ctype(self) -> str:
        return _C_NAMES[self.base]

    # ----- value ranges ---------------------------------------------------------------------
    def max_value(self):
        if self.is_float:
            return _FLOAT_MAX[self.base]
        if self.is_bool:
            return True
        return (1 << (self.bits - (1 if self.kind == "i" else 0))) - 1

    def min_value(self):
        if self.is_float:
            return -_FLOAT_MAX[self.base]
        if self.is_bool:
            return False
        return -(1 << (self.bits - 1)) if self.kind == "i" else 0

    # ----- user-facing behaviour ------------------------------------------------------------
    def __call__(self, value=None, *args, **kwargs):
        """`T.float32(0.0)` is a typed constant, `T.float32(x)` a cast, `T.int32()` a fresh
        scalar variable of the type (the reference's TVMScript meaning; as a parameter
        annotation it declares a scalar parameter). `T.float16x2(a, b)` (one value per lane)
        is a vector (`T.Broadcast`'s kind)."""
        if value is None and not args:
            from .nodes import Var

            return Var(kwargs.get("name", "v"), self)
        if args:
            if len(args) + 1 != self.lanes:
                raise ValueError(f"{self}(...) takes one value per lane ({self.lanes}), got "
                                 f"{len(args) + 1}")
            from . import hooks
            from .nodes import cast_to

            scalar = DType(self.base)
            return hooks.vector(cast_to(v, scalar) for v in (value,) + args)
        from .nodes import cast_to

        return cast_to(value, self)

    def __eq__(self, other):
        if self is other:
            return True
        if type(other) is DType:
            return False  # interned: one object per type
        if other is None:
            return False
        try:
            return self.name == canonical_dtype_name(other)
        except (ValueError, TypeError):
            return False

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = str.__hash__

    def __repr__(self):
        return f"dtype('{str.__str__(self)}')"

    def __str__(self):
        return str.__str__(self)


_FLOAT_MAX = {
    "float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": float(np.finfo(np.float32).max),
    "float64": float(np.finfo(np.float64).max), "float8_e4m3": 448.0, "float8_e5m2": 57344.0,
    "float4_e2m1fn": 6.0, "float6_e2m3fn": 7.5, "float6_e3m2fn": 28.0,
    "float8_e8m0fnu": 1.7014118346046923e38,
}


def dtype(value) -> DType:
    """Canonicalise any dtype spelling to a `DType` (errors name the bad spelling)."""
    return DType(value)


def is_dtype_like(value) -> bool:
    try:
        canonical_dtype_name(value)
        return True
    except (ValueError, TypeError):
        return False


def infinity(dt) -> float:
    return math.inf


# ---- what the tile operators accept (one rule for the interpreter and CUDA) --------------------

# T.gemm: operand dtype -> accumulator dtypes. The union of what the tensor-core instructions
# compute, plus float64 -> float64, which the reference lowers and the interpreter runs (CUDA
# here rejects it as not supported yet). Both operands have one dtype (8-bit floats may mix).
GEMM_ACCUMULATORS = {
    "float16": ("float32", "float16"), "bfloat16": ("float32",), "float32": ("float32",),
    "int8": ("int32",), "uint8": ("int32",), "float8_e4m3": ("float32",),
    "float8_e5m2": ("float32",), "float64": ("float64",),
    # packed 4-bit operands (mma.sync .s4 / .u4, sm_80+)
    "int4": ("int32",), "uint4": ("int32",),
}

# Element types of the scalar and tile atomics (what tl/atomic.cuh implements).
_ATOMIC_RMW = ("float16", "bfloat16", "float32", "float64", "int32", "int64", "uint32", "uint64")
ATOMIC_DTYPES = {
    "atomic_add": _ATOMIC_RMW, "atomic_max": _ATOMIC_RMW, "atomic_min": _ATOMIC_RMW,
    "atomic_or": ("int32", "int64", "uint32", "uint64"),
    "atomic_and": ("int32", "int64", "uint32", "uint64"),
    "atomic_xor": ("int32", "int64", "uint32", "uint64"),
    "atomic_addx2": ("float16", "bfloat16", "float32"),
    "atomic_addx4": ("float16", "bfloat16", "float32"),
    "atomic_load": ("int16", "uint16", "float16", "bfloat16") + _ATOMIC_RMW[2:],
    "atomic_store": ("int16", "uint16", "float16", "bfloat16") + _ATOMIC_RMW[2:],
}

# Element types the TMA unit adds (cp.reduce.async.bulk.tensor .add: .f16 .bf16 .f32 .s32 .u32
# .u64): T.atomic_add(..., use_tma=True) takes only these, as on the reference.
TMA_ADD_DTYPES = ("float16", "bfloat16", "float32", "int32", "uint32", "uint64")


def gemm_dtype_problem(a: DType, b: DType, c: DType):
    """Why T.gemm cannot take operands of dtypes a, b into an accumulator of dtype c (None:
    it can)."""
    if a is not b and not (a.is_float8 and b.is_float8):
        return f"operands A ({a}) and B ({b}) must have the same dtype"
    allowed = GEMM_ACCUMULATORS.get(a.name)
    if allowed is None or c.name not in allowed:
        table = ", ".join(f"{k} -> {'/'.join(v)}" for k, v in GEMM_ACCUMULATORS.items())
        return (f"{a} operands accumulating into {c} is not a gemm the language defines "
                f"(operand -> accumulator: {table})")
    return None


# ---- values rounded to the narrow float types (bfloat16, float8) ------------------------------

# (mantissa bits, minimum normal exponent, largest finite value, saturate instead of inf)
FP8_FORMATS = {
    "float8_e4m3": (3, -6, 448.0, True),
    "float8_e5m2": (2, -14, 57344.0, False),
}


def as_array(x):
    a = np.asarray(x)
    return a, a.ndim == 0


def c_contiguous(a, dtype=None):
    """C-contiguous array (keeps 0-d arrays 0-d, unlike np.ascontiguousarray)."""
    a = np.asarray(a, dtype=dtype)
    return a if a.flags.c_contiguous else a.copy()


def _bf16(a32: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (nearest even) keeping float32 storage; NaN stays NaN."""
    bits = c_contiguous(a32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    out = (rounded & np.uint32(0xFFFF0000)).view(np.float32)
    nan = np.isnan(a32)
    if nan.any():
        out = np.where(nan, np.float32(np.nan), out)
    return out


# float4_e2m1fn (values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives): no inf and no NaN;
# conversions saturate and NaN converts to +6, as CUDA's float -> e2m1 conversion does
FP4_E2M1 = (1, 0, 6.0, True)


def _fp8(a32: np.ndarray, name: str) -> np.ndarray:
    return _minifloat(a32, FP8_FORMATS[name])


def _minifloat(a32: np.ndarray, fmt) -> np.ndarray:
    mbits, emin, fmax, saturate = fmt
    x = a32.astype(np.float64)
    mag = np.abs(x)
    finite = np.isfinite(mag)
    safe = np.where(finite, mag, 0.0)
    _, e = np.frexp(safe)  # safe = m * 2**e with 0.5 <= m < 1
    exp = np.maximum(e - 1, emin)  # exponent of the binade (subnormals share emin)
    quantum = np.ldexp(1.0, exp - mbits)
    r = np.rint(safe / quantum) * quantum  # rint: ties to even
    over = (r > fmax) | ~finite
    r = np.where(over, fmax if saturate else np.inf, r)
    r = np.where(np.isnan(x), np.nan, np.copysign(r, x))
    return r.astype(np.float32)


def _e8m0(a32: np.ndarray) -> np.ndarray:
    """float8_e8m0fnu (2^(code - 127), code 255 NaN; no sign, no zero), as torch converts:
    the float32 exponent, rounded up when the mantissa's first dropped bit is set (unless
    that is all of a subnormal's mantissa: ties to even); inf, NaN and overflow are NaN, the
    sign is dropped."""
    bits = c_contiguous(a32, np.float32).view(np.uint32)
    exp = ((bits >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int64)
    guard = (bits & np.uint32(0x400000)) != 0
    below = (bits & np.uint32(0x3FFFFF)) != 0
    code = exp + (guard & (below | (exp > 0)))
    code = np.where(exp == 255, 255, code)
    return np.where(code >= 255, np.float32(np.nan),
                    np.ldexp(np.float32(1.0), np.minimum(code, 254) - 127).astype(np.float32))


def round_to(arr, dtype) -> np.ndarray:
    """Round float32 values to the nearest value of a narrow float dtype (bfloat16,
    float8_e4m3, float8_e5m2, float8_e8m0fnu, float4_e2m1fn); other dtypes return the values
    as float32 unchanged."""
    dt = DType(dtype)
    a, scalar = as_array(arr)
    a32 = a.astype(np.float32, copy=False)
    if dt.name == "bfloat16":
        out = _bf16(a32)
    elif dt.name in FP8_FORMATS:
        out = _fp8(a32, dt.name)
    elif dt.name == "float8_e8m0fnu":
        out = _e8m0(a32)
    elif dt.name == "float4_e2m1fn":
        out = _minifloat(np.where(np.isnan(a32), np.float32(FP4_E2M1[2]), a32), FP4_E2M1)
    else:
        out = a32
    return out[()] if scalar else out
