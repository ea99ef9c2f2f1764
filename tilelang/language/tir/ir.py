"""`tilelang.language.tir.ir`: `cast` with the reference's rounding options and its table of
valid rounding modes, at the reference's import path (the same objects as `T.cast`)."""

from ..math import _VALID_CAST_ROUNDING_MODES, cast

__all__ = ["cast"]

_VALID_CAST_ROUNDING_MODES = _VALID_CAST_ROUNDING_MODES
