"""`tvm.ir` for reference programs: `structural_equal` (kernel expressions, and the objects of
`tilelang.layout.cute`) and `Range` (`Range.from_min_extent`, `Range(begin, end)`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import nodes as _ir

__all__ = ["structural_equal", "Range", "PrimExpr"]

PrimExpr = _ir.Expr


def structural_equal(lhs, rhs, map_free_vars: bool = False) -> bool:
    """Same structure: expressions node by node (variables by identity), CuTe layouts and
    IntTuples by their trees, ints equal to constants of their value."""
    same_as = getattr(lhs, "same_as", None)
    if same_as is not None and not isinstance(lhs, _ir.Node):
        return bool(same_as(rhs))
    if isinstance(lhs, (tuple, list)) and isinstance(rhs, (tuple, list)):
        return len(lhs) == len(rhs) and all(structural_equal(a, b) for a, b in zip(lhs, rhs))
    return _ir.structural_equal(lhs, rhs)


@dataclass(frozen=True)
class Range:
    """An index range `[min, min + extent)` (ints or kernel expressions)."""

    min: object
    extent: object

    def __init__(self, begin, end=None):
        if end is None:
            begin, end = 0, begin
        object.__setattr__(self, "min", begin)
        object.__setattr__(self, "extent", end - begin)

    @staticmethod
    def from_min_extent(min_value, extent) -> "Range":
        r = Range.__new__(Range)
        object.__setattr__(r, "min", min_value)
        object.__setattr__(r, "extent", extent)
        return r
