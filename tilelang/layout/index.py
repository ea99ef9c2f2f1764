"""Index arithmetic that works on three kinds of values at once.

Every index function of the layout package (swizzles, fragment coordinates, guards) is written
with `+ - * // %` and the helpers below, so the same code runs on

* Python ints (one element, e.g. a constant register slot),
* numpy integer arrays (vectorised enumeration: checks, plots, tables),
* IR expressions (`tilelang.ir.Expr`: symbolic, e.g. a thread variable during lowering).

`//` and `%` are floor division / floor modulo on all three (IR `floordiv` / `floormod`).
The helpers never build IR for ints or arrays, and never lose the IR type for expressions.
"""

from __future__ import annotations

import numpy as np

from ..ir import nodes as ir

__all__ = ["xor", "is_symbolic", "is_array", "lt", "ge", "all_of", "eq", "static_int",
           "static_shape", "prod", "distinct"]


def is_symbolic(x) -> bool:
    """True for IR values (expressions, vars, buffer refs): anything that overloads to IR."""
    return isinstance(x, ir.ExprOps)


def is_array(x) -> bool:
    return isinstance(x, np.ndarray)


def xor(a, b):
    """Bitwise xor: `^` on ints and numpy arrays, an IR `bitxor` node on expressions."""
    if is_symbolic(a) or is_symbolic(b):
        return ir.binary("bitxor", a, b)
    return a ^ b


def lt(a, b):
    """`a < b` as a bool, a boolean array or an IR comparison."""
    if is_symbolic(a) or is_symbolic(b):
        return ir.compare("lt", a, b)
    return a < b


def ge(a, b):
    if is_symbolic(a) or is_symbolic(b):
        return ir.compare("ge", a, b)
    return a >= b


def eq(a, b):
    if is_symbolic(a) or is_symbolic(b):
        return ir.compare("eq", a, b)
    return a == b


def all_of(conds):
    """Conjunction of conditions of any kind; None for an empty list (no condition)."""
    out = None
    for c in conds:
        if out is None:
            out = c
        elif is_symbolic(out) or is_symbolic(c):
            out = ir.logical_and(out, c)
        elif is_array(out) or is_array(c):
            out = np.logical_and(out, c)
        else:
            out = bool(out) and bool(c)
    return out


def static_int(x):
    """`x` as a Python int when it is a known integer (int, numpy int, integer Const), else None."""
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, ir.Const) and x.dtype.is_int:
        return int(x.value)
    return None


def static_shape(shape, what="layout") -> tuple:
    """A shape as a tuple of Python ints, or a ValueError naming the symbolic extent."""
    out = []
    for s in shape:
        v = static_int(s)
        if v is None:
            raise ValueError(f"{what} needs a static shape, got extent {s} in {list(shape)}")
        if v < 0:
            raise ValueError(f"{what} shape {list(shape)} has a negative extent")
        out.append(v)
    return tuple(out)


def prod(xs):
    """Product that keeps IR expressions symbolic (math.prod would too, but starts from int)."""
    out = 1
    for x in xs:
        out = out * x
    return out


def canonical_int(x):
    """Fold an integer Const produced by IR arithmetic back into a Python int."""
    v = static_int(x)
    return v if v is not None else x


def distinct(values) -> np.ndarray:
    """The distinct values of an integer array, ascending (what `np.unique` returns). Not
    `np.unique` itself: numpy 2.4+ imports `numpy.ma` on its first call (5 ms of a process's
    first compile)."""
    a = np.sort(np.asarray(values).ravel())
    if a.size < 2:
        return a
    keep = np.empty(a.size, bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]
