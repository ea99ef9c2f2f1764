"""`SwizzleMode` under the name the CuTe algebra's tests import it by: the one enum of
tilelang/layout/swizzle_enum.py (the swizzles TMA and wgmma know, and their descriptor codes)."""

from __future__ import annotations

from ..swizzle_enum import SwizzleMode

__all__ = ["SwizzleMode"]
