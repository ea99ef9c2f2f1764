"""Evaluate integer index expressions on numpy arrays (vectorised over thread/value grids).

Used by passes that check layout facts by enumeration ("which thread holds this element for
every thread and register?") instead of by symbolic proof.
"""

from __future__ import annotations

import numpy as np

from ...ir import nodes as ir


def eval_index(e, env: dict):
    """Value of integer expression `e` with Vars bound to ints or numpy arrays in `env`."""
    if isinstance(e, (int, np.integer)):
        return e
    if isinstance(e, ir.Var):
        if e not in env:
            raise KeyError(e.name)
        return env[e]
    if isinstance(e, ir.Const):
        return e.value
    if isinstance(e, ir.Binary):
        a, b = eval_index(e.a, env), eval_index(e.b, env)
        op = e.op
        if op == "add":
            return a + b
        if op == "sub":
            return a - b
        if op == "mul":
            return a * b
        if op == "floordiv":
            return a // b
        if op == "floormod":
            return a % b
        if op == "truncdiv":
            return np.trunc(np.asarray(a) / np.asarray(b)).astype(np.int64)
        if op == "truncmod":
            return a - np.trunc(np.asarray(a) / np.asarray(b)).astype(np.int64) * b
        if op == "min":
            return np.minimum(a, b)
        if op == "max":
            return np.maximum(a, b)
        if op == "bitand":
            return a & b
        if op == "bitor":
            return a | b
        if op == "bitxor":
            return a ^ b
        if op == "shl":
            return a << b
        if op == "shr":
            return a >> b
    if isinstance(e, ir.Select):
        return np.where(eval_index(e.cond, env), eval_index(e.true_value, env),
                        eval_index(e.false_value, env))
    if isinstance(e, ir.Compare):
        a, b = eval_index(e.a, env), eval_index(e.b, env)
        return {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
                "eq": np.equal, "ne": np.not_equal}[e.op](a, b)
    if isinstance(e, ir.Logical):
        a, b = eval_index(e.a, env), eval_index(e.b, env)
        return np.logical_and(a, b) if e.op == "and" else np.logical_or(a, b)
    if isinstance(e, ir.Cast):
        return eval_index(e.value, env)
    if isinstance(e, ir.Unary):
        a = eval_index(e.a, env)
        return {"neg": np.negative, "not": np.logical_not, "bitnot": np.invert}[e.op](a)
    raise TypeError(f"cannot evaluate {type(e).__name__} as an index")
