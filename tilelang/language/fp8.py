"""`tilelang.language.fp8`: which 8-bit float types this platform uses.

This compiler targets NVIDIA GPUs, whose FP8 types are E4M3 with no infinities (torch's
`float8_e4m3fn`) and E5M2; the AMD-only FNUZ variants never come out of these functions.
"""

from __future__ import annotations

__all__ = ["determine_fp8_type", "determine_torch_fp8_type"]


def determine_fp8_type(fp8_format: str = "e4m3", device=None):
    """`T.float8_e4m3fn` for "e4m3", `T.float8_e5m2` for "e5m2" (the dtype objects, which are
    also the strings "float8_e4m3fn" / "float8_e5m2")."""
    from . import types

    if fp8_format == "e4m3":
        return types.float8_e4m3fn
    if fp8_format == "e5m2":
        return types.float8_e5m2
    raise ValueError(f"unsupported FP8 format {fp8_format!r}: use 'e4m3' or 'e5m2'")


def determine_torch_fp8_type(fp8_format: str = "e4m3", device=None):
    """The torch dtype of `determine_fp8_type(fp8_format)`."""
    return determine_fp8_type(fp8_format, device).as_torch()
