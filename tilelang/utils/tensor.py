"""`tilelang.utils.tensor`: tensor supply for profiling, dtype mapping and tolerant comparison
(the reference's names; the implementations live in `tilelang.profiler.supply` and
`tilelang.testing.compare`)."""

from __future__ import annotations

from ..profiler.supply import TensorSupplyType, get_tensor_supply  # noqa: F401
from ..testing.compare import torch_assert_close  # noqa: F401

# spellings of older reference releases and AMD formats that DType does not keep apart
_LEGACY = {
    "e4m3_float8": "float8_e4m3fn", "e5m2_float8": "float8_e5m2",
    "e4m3fnuz_float8": "float8_e4m3fnuz", "float8_e4m3fnuz": "float8_e4m3fnuz",
    "e5m2fnuz_float8": "float8_e5m2fnuz", "float8_e5m2fnuz": "float8_e5m2fnuz",
}


def map_torch_type(intype):
    """The torch dtype of a TileLang dtype (`"float16"`, `T.float16`, `"float8_e4m3"`, the old
    `"e4m3_float8"`, ...); a torch dtype is returned unchanged."""
    import torch

    if isinstance(intype, torch.dtype):
        return intype
    name = getattr(intype, "name", None) if not isinstance(intype, str) else intype
    if isinstance(name, str) and name in _LEGACY:
        return getattr(torch, _LEGACY[name])
    from ..ir.dtype import DType

    try:
        return DType(intype).torch
    except (ValueError, KeyError, TypeError):
        pass
    found = getattr(torch, str(name), None)
    if isinstance(found, torch.dtype):
        return found
    raise ValueError(f"no torch dtype for {intype!r}")


def is_float8_dtype(dtype) -> bool:
    """Whether a torch dtype (or a TileLang dtype name) is one of the float8 formats."""
    import torch

    if not isinstance(dtype, torch.dtype):
        dtype = map_torch_type(dtype)
    return "float8" in str(dtype)
