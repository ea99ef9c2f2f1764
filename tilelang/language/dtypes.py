"""`tilelang.language.dtypes`: the dtype objects under their reference names, and the
reference's conversion tables.

Every name is a `DType` (a `str` too, see tilelang/ir/dtype.py): scalars (`float16`,
`bfloat16`, `int8`, `uint`, `tfloat32`, `float8_e4m3fn`, ...), vectors (`float16x2`,
`int8x4`, ...; lanes 2 to 64) and the types that have no buffer storage here but are valid
values (`int4`, `uint4`; `float4_e2m1fn` is stored in global tensors only,
packed two to a byte: tilelang/jit/packed.py). `tfloat32` is `float32` (a
float32 `T.gemm` already computes in TF32); `float8_e4m3` is `float8_e4m3fn` (the E4M3 of
NVIDIA GPUs).

The tables `_TORCH_DTYPE_TO_STR`, `_STR_TO_TORCH_DTYPE`, `_NUMPY_DTYPE_TO_STR`,
`_PYTHON_DTYPE_TO_STR`, `_DTYPE_TO_STR` map other type systems to dtype names (the torch
ones are built on first use, so `import tilelang` does not import torch).
"""

# ruff: noqa: F401, A001
from __future__ import annotations

import builtins as _b

from ..ir.dtype import DType as dtype

_SCALARS = {
    "bool": "bool", "short": "int16", "int": "int32", "uint": "uint32", "long": "int64",
    "half": "float16", "float": "float32", "double": "float64",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float64": "float64",
    "tfloat32": "float32",
    "float8_e4m3": "float8_e4m3", "float8_e4m3fn": "float8_e4m3", "float8_e5m2": "float8_e5m2",
    # no storage here (sub-byte, or no CUDA type in this compiler): values only
    "int4": "int4", "uint4": "uint4", "float4_e2m1fn": "float4_e2m1fn",
    "float8_e8m0fnu": "float8_e8m0fnu", "float6_e2m3fn": "float6_e2m3fn",
    "float6_e3m2fn": "float6_e3m2fn", "float8_e4m3fnuz": "float8_e4m3fnuz",
    "float8_e5m2fnuz": "float8_e5m2fnuz", "float8_e3m4": "float8_e3m4",
    "float8_e4m3b11fnuz": "float8_e4m3b11fnuz", "float4_e2m1_unpacked": "float4_e2m1_unpacked",
}
_VECTOR_BASES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "float32", "float64", "float8_e3m4", "float8_e4m3",
                 "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                 "float8_e5m2fnuz", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn",
                 "float4_e2m1fn", "tfloat32")
_LANES = (2, 4, 8, 16, 32, 64)

_all_dtypes = list(_SCALARS)
for _name, _canon in _SCALARS.items():
    globals()[_name] = dtype(_canon)
for _base in _VECTOR_BASES:
    for _n in _LANES:
        globals()[f"{_base}x{_n}"] = dtype(f"{_SCALARS[_base]}x{_n}")
        _all_dtypes.append(f"{_base}x{_n}")
globals()["bfloat16x2"] = dtype("bfloat16x2")
_all_dtypes.append("bfloat16x2")

_PYTHON_DTYPE_TO_STR = {_b.bool: "bool", _b.int: "int32", _b.float: "float32"}
_CANONICAL_TO_DISPLAY_STR = {"double": "float64", "float": "float32", "int": "int32",
                             "long": "int64", "short": "int16", "uint": "uint32",
                             "ulong": "uint64"}


def _numpy_table() -> dict:
    import numpy as np

    table = {np.bool_: "bool", np.int8: "int8", np.int16: "int16", np.int32: "int32",
             np.int64: "int64", np.uint8: "uint8", np.uint16: "uint16", np.uint32: "uint32",
             np.uint64: "uint64", np.float16: "float16", np.float32: "float32",
             np.float64: "float64"}
    table.update({np.dtype(k): v for k, v in list(table.items())})
    return table


def _torch_table() -> dict:
    import torch

    table = {torch.bool: "bool", torch.int8: "int8", torch.int16: "int16",
             torch.int32: "int32", torch.int64: "int64", torch.uint8: "uint8",
             torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32",
             torch.float64: "float64"}
    for name in ("uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2",
                 "float8_e8m0fnu"):
        t = getattr(torch, name, None)
        if t is not None:
            table[t] = name
    return table


_LAZY_TABLES = {
    "_NUMPY_DTYPE_TO_STR": _numpy_table,
    "_TORCH_DTYPE_TO_STR": _torch_table,
    "_STR_TO_TORCH_DTYPE": lambda: {v: k for k, v in _torch_table().items()},
    "_DTYPE_TO_STR": lambda: {**_PYTHON_DTYPE_TO_STR, **_numpy_table(), **_torch_table()},
}


def __getattr__(name):
    make = _LAZY_TABLES.get(name)
    if make is None:
        raise AttributeError(f"module 'tilelang.language.dtypes' has no attribute {name!r}")
    value = make()
    globals()[name] = value
    return value


def resolve_torch_storage_dtype(value) -> dtype:
    """The dtype of the torch tensors that hold `value` (`int4` -> `int8`, `float4_e2m1fn` ->
    `float4_e2m1fnx2`, other types themselves)."""
    return dtype(dtype(value).as_torch())


def get_tvm_dtype(value) -> dtype:
    """The dtype of any spelling (string, torch/numpy dtype, Python type, dtype)."""
    return dtype(value)


AnyDType = object  # anything `dtype(...)` accepts


def is_float4_e2m1fn(value) -> bool:
    """Whether `value` is the 4-bit float E2M1 (packed FP4)."""
    return dtype(value).is_float4_e2m1fn()


def is_float4_e2m1_unpacked(value) -> bool:
    """Whether `value` is the reference's byte-per-value FP4 staging type (a tag here: no
    buffers of it, as it stages tcgen05 operands of sm_100)."""
    return dtype(value).is_float4_e2m1_unpacked()


def is_float4(value) -> bool:
    """Whether `value` is any FP4 E2M1 type."""
    return dtype(value).is_float4()


def is_f8f6f4_family(value) -> bool:
    """Whether `value` is an 8-, 6- or 4-bit float (the tcgen05 f8f6f4 operand family)."""
    d = dtype(value)
    return d.is_float4() or d.base.startswith(("float8", "float6"))


def validate_gemm_ab_dtypes(a_dtype, b_dtype, *, a_in_tmem=False, allow_f8f6f4_mixed=False):
    """A and B of a gemm have the same dtype (8-bit floats may mix when allowed)."""
    if a_in_tmem or dtype(a_dtype) == dtype(b_dtype):
        return
    if allow_f8f6f4_mixed and is_f8f6f4_family(a_dtype) and is_f8f6f4_family(b_dtype):
        return
    raise ValueError(f"Mixed-dtype GEMM only supports f8f6f4 family operands currently, got "
                     f"A={a_dtype}, B={b_dtype}")


__all__ = list(_all_dtypes) + ["dtype", "AnyDType", "get_tvm_dtype",
                               "resolve_torch_storage_dtype", "is_float4_e2m1fn",
                               "is_float4_e2m1_unpacked", "is_float4", "is_f8f6f4_family",
                               "validate_gemm_ab_dtypes"]
