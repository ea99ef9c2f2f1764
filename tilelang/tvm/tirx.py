"""`tvm.tirx` for reference programs: builders of kernel expressions under TVM's names.

    mask = tirx.const((1 << nbit) - 1, T.uint16)
    f4 = (val >> (pos.astype(T.uint16) * tirx.const(nbit, T.uint16))) & mask
    val_bf16 = tirx.reinterpret(T.bfloat16, bits.astype(T.uint16))

Each name builds the same expression as its T counterpart (`T.reinterpret`, `T.Select`,
`T.Cast`, `T.min`, ...; `And` / `Or` / `Not` / `all` / `any` the logical `and` / `or` / `not`
of a kernel body); `PrimExpr` is the class of kernel expressions (for annotations and
isinstance checks). `IndexMap.from_func(f)` wraps an index function (`map_indices`).
`stmt_functor.substitute(expr, {var: value})` replaces variables.
"""

from __future__ import annotations

import types as _types
import sys as _sys

from ..ir import nodes as _ir
from ..ir.dtype import DType as _DType
from ..ir.visitor import substitute as _substitute

__all__ = ["PrimExpr", "Var", "And", "Or", "Not", "all", "any", "Buffer", "BufferLoad", "Call", "IntImm", "FloatImm", "const",
           "decl_buffer", "Cast",
           "Select", "Min", "Max", "reinterpret", "if_then_else", "floordiv", "floormod",
           "truncdiv", "truncmod", "call_extern", "IndexMap", "stmt_functor"]

PrimExpr = _ir.Expr
Buffer = _ir.Buffer
BufferLoad = _ir.Load
Call = _ir.Call


class _VarType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, _ir.Var)


class Var(metaclass=_VarType):
    """`tirx.Var(name, dtype)`: a scalar kernel variable (the dtype in any spelling);
    `isinstance(x, tirx.Var)` holds for every kernel variable."""

    def __new__(cls, name="v", dtype="int32", span=None):
        return _ir.Var(str(name), _DType(dtype))


def decl_buffer(shape, dtype="float32", name="buffer", data=None, strides=None,
                elem_offset=None, scope="", data_alignment=-1, offset_factor=0,
                buffer_type="", axis_separators=None, span=None):
    """A buffer object outside any kernel (`scope` "shared", "local.fragment", ...; default
    global), e.g. to build a layout for it (`make_swizzled_layout(buf)`)."""
    if isinstance(shape, int):
        shape = (shape,)
    return _ir.Buffer(str(name), tuple(shape), _DType(dtype), scope or "global",
                      None if strides is None else tuple(strides))


def const(value, dtype=None):
    """A typed constant: `tirx.const(3, "uint32")` (int32 / float32 / bool from the value's
    Python type when `dtype` is omitted)."""
    return _ir.const(value, None if dtype is None else _DType(dtype))


def IntImm(dtype, value):  # noqa: N802 - TVM's name
    return _ir.const(int(value), _DType(dtype))


def FloatImm(dtype, value):  # noqa: N802 - TVM's name
    return _ir.const(float(value), _DType(dtype))


def Cast(dtype, value):  # noqa: N802 - TVM's name
    """`value` converted to `dtype` (TVM's argument order)."""
    from ..language.math import cast

    return cast(value, dtype)


def Select(cond, true_value, false_value):  # noqa: N802 - TVM's name
    from ..language.math import Select as _select

    return _select(cond, true_value, false_value)


def Min(a, b):  # noqa: N802 - TVM's name
    from ..language.math import min as _min

    return _min(a, b)


def Max(a, b):  # noqa: N802 - TVM's name
    from ..language.math import max as _max

    return _max(a, b)


def reinterpret(dtype, value):
    """The bits of `value` read as `dtype` (same total width)."""
    from ..language.math import reinterpret as _reinterpret

    return _reinterpret(value, dtype)


def if_then_else(cond, a, b):
    from ..language.math import if_then_else as _ite

    return _ite(cond, a, b)


def floordiv(a, b):
    from ..language.math import floordiv as _f

    return _f(a, b)


def floormod(a, b):
    from ..language.math import floormod as _f

    return _f(a, b)


def truncdiv(a, b):
    from ..language.math import truncdiv as _f

    return _f(a, b)


def truncmod(a, b):
    from ..language.math import truncmod as _f

    return _f(a, b)


def call_extern(dtype, func_name, *args, span=None):
    """A call of the device function `func_name` (T.call_extern)."""
    from ..language.misc import call_extern as _call

    return _call(dtype, func_name, *args)


class IndexMap:
    """An index function (`IndexMap.from_func(lambda i, j: (i // 2, j))`): `map_indices`
    applies it to concrete indices (ints) or expressions."""

    def __init__(self, func, ndim=None):
        self.func = func
        self.ndim = ndim

    @classmethod
    def from_func(cls, func, ndim=None, index_dtype=None):
        return cls(func, ndim)

    def map_indices(self, indices):
        out = self.func(*indices)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def __call__(self, *indices):
        return self.map_indices(indices)

    def __repr__(self):
        return f"IndexMap({getattr(self.func, '__name__', self.func)})"


stmt_functor = _types.SimpleNamespace(substitute=_substitute)
stmt_functor.__doc__ = "`substitute(expr, {var: value})`: variables (by identity) replaced."
def And(a, b):  # noqa: N802 - TVM's name
    """`a and b` of two kernel conditions."""
    return _ir.logical_and(a, b)


def Or(a, b):  # noqa: N802 - TVM's name
    """`a or b` of two kernel conditions."""
    return _ir.logical_or(a, b)


def Not(a):  # noqa: N802 - TVM's name
    """`not a` of a kernel condition."""
    return _ir.logical_not(a)


def _fold(combine, conds, name, identity):
    if not conds:
        raise ValueError(f"tirx.{name} needs at least one condition")
    out = conds[0]
    for c in conds[1:]:
        out = combine(out, c)
    return combine(out, identity) if len(conds) == 1 else out  # one condition: as a bool


def all(*conds):  # noqa: A001 - TVM's name
    """The conjunction of one or more conditions (`tirx.all(a < b, b < c)`)."""
    return _fold(_ir.logical_and, conds, "all", True)


def any(*conds):  # noqa: A001 - TVM's name
    """The disjunction of one or more conditions."""
    return _fold(_ir.logical_or, conds, "any", False)


# `tvm.tirx.expr` (where TVM defines the expression classes) is this module too
expr = _sys.modules[__name__]
