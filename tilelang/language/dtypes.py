"""`tilelang.language.dtypes`: the dtype objects under their reference names."""

# ruff: noqa: F401
from ..ir.dtype import DType as dtype
from .types import (bfloat16, double, float8_e4m3, float8_e4m3fn, float8_e5m2, float16, float32,
                    float64, half, int8, int16, int32, int64, long, short, uint8, uint16,
                    uint32, uint64)
from .types import bool_ as bool
from .types import float_ as float
from .types import int_ as int
