"""Reductions as the passes build them: the identity and the combine of each reduction kind
(lower_reduce, reducer_fragments), and the markers reducer_fragments leaves for layout
inference and partition_parallel around a reducer's contributions."""

from __future__ import annotations

import numpy as np

from ...ir import nodes as ir
from ...ir.dtype import DType
from ...ir.visitor import Mutator

UPDATE = "reducer_update"  # marks a contribution to a reducer's register partial
KIND = {"add": "sum", "max": "max", "min": "min",  # lower_reduce names of the ops
        "bitand": "bitand", "bitor": "bitor", "bitxor": "bitxor"}


def init_value(kind: str, dt: DType):
    """The identity of reduction `kind` in `dt` (SEMANTICS §8)."""
    if kind == "max":
        return ir.const(-np.inf if dt.is_float else dt.min_value(), dt)
    if kind == "min":
        return ir.const(np.inf if dt.is_float else dt.max_value(), dt)
    if kind == "bitand":
        return ir.const(-1 if dt.is_signed_int else dt.max_value(), dt)
    return ir.const(0, dt)


def combine(kind: str, acc, x, nan_propagate=False):
    """`acc` combined with `x` by reduction `kind` (max/min propagate NaN when asked)."""
    if kind in ("sum", "abssum"):
        return ir.binary("add", acc, x)
    if kind in ("max", "absmax"):
        if nan_propagate and acc.dtype.is_float:
            return ir.Call("max_nan", (ir.as_expr(acc), ir.as_expr(x)), acc.dtype)
        return ir.binary("max", acc, x)
    if kind == "min":
        if nan_propagate and acc.dtype.is_float:
            return ir.Call("min_nan", (ir.as_expr(acc), ir.as_expr(x)), acc.dtype)
        return ir.binary("min", acc, x)
    return ir.binary({"bitand": "bitand", "bitor": "bitor", "bitxor": "bitxor"}[kind], acc, x)


def element(kind: str, value, dt: DType):
    """What one element contributes to reduction `kind` (its absolute value for abs*)."""
    v = ir.cast_to(value, dt)
    if kind in ("abssum", "absmax"):
        return ir.Call("abs", (v,), dt)
    return v


def contribute_once(body, representative):
    """The contributions of one iteration of a T.Parallel loop that several threads run (a
    replicated loop layout): only the representative thread adds to its partial, so that the
    combine counts each contribution once. `representative` is None for an unreplicated
    layout; the markers go either way."""

    class Unwrap(Mutator):
        def visit_Attr(self, s):
            if s.key != UPDATE:
                return self.generic(s)
            inner = self.visit(s.body)
            if representative is None:
                return inner
            return ir.If(ir.as_expr(representative), inner, None, loc=s.loc)

    return Unwrap().visit(body)
