"""Module-level entry points of the integer simplifier (see `analyzer.Analyzer`).

`simplify(expr, analyzer=None)` returns an equivalent, simpler expression of the same dtype:
int32/int64 index arithmetic is put in canonical sum-of-products form and rendered back with
positive terms first (`x * 8 + y - z`), division/modulo/min/max/comparisons are decided from
variable ranges when an analyzer with ranges is given; float arithmetic is only constant-folded.
`prove` and `const_int_bound` use an empty analyzer unless one is passed.
"""

from __future__ import annotations

from .analyzer import Analyzer

__all__ = ["simplify", "prove", "const_int_bound", "Analyzer"]

_DEFAULT = Analyzer()


def simplify(expr, analyzer: Analyzer = None):
    return (analyzer or _DEFAULT).simplify(expr)


def prove(cond, analyzer: Analyzer = None) -> bool:
    return (analyzer or _DEFAULT).prove(cond)


def const_int_bound(expr, analyzer: Analyzer = None):
    return (analyzer or _DEFAULT).const_int_bound(expr)
