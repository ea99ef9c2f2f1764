"""Evaluate scalar integer/bool expressions with Python numbers (a reference for the simplifier).

`evaluate(expr, env)` computes the value of `expr` given `env`, a dict from Var (by identity) to
a Python int/bool/float. Integer arithmetic is exact (no overflow), like the simplifier's
model of int32/int64 index arithmetic, unless `wrap=True`, which wraps every integer result to
its dtype as the hardware would; explicit casts to an integer type always wrap. `//` and `%` are floor division and modulo; truncdiv/truncmod
round toward zero; shifts and bit operations act on two's complement values. Loads are
answered by `load(buffer, indices)` when given, otherwise they raise KeyError.
"""

from __future__ import annotations

import math

from ..ir import nodes as ir


def _tdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


_BIN = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "floordiv": lambda a, b: a // b,
    "floormod": lambda a, b: a % b,
    "truncdiv": _tdiv,
    "truncmod": lambda a, b: a - _tdiv(a, b) * b,
    "min": min,
    "max": max,
    "pow": lambda a, b: a ** b,
    "bitand": lambda a, b: a & b,
    "bitor": lambda a, b: a | b,
    "bitxor": lambda a, b: a ^ b,
    "shl": lambda a, b: a << b,
    "shr": lambda a, b: a >> b,
}
_CMP = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
        "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}


def _wrap(v, dt):
    if dt.is_int and isinstance(v, int):
        mod = 1 << dt.bits
        v %= mod
        if dt.is_signed_int and v >= mod // 2:
            v -= mod
    return v


def evaluate(expr, env: dict, load=None, wrap: bool = False):
    """The value of `expr` under `env` (Var -> value)."""

    def ev(e):
        t = type(e)
        if t is ir.Const:
            return e.value
        if t is ir.Var:
            return env[e]
        if t is ir.Binary:
            a, b = ev(e.a), ev(e.b)
            if e.dtype.is_bool:
                a, b = bool(a), bool(b)
            v = _BIN[e.op](a, b)
            return _wrap(v, e.dtype) if wrap else v
        if t is ir.Compare:
            return _CMP[e.op](ev(e.a), ev(e.b))
        if t is ir.Logical:
            a = bool(ev(e.a))
            if e.op == "and":
                return a and bool(ev(e.b))
            return a or bool(ev(e.b))
        if t is ir.Unary:
            a = ev(e.a)
            if e.op == "not":
                return not a
            v = -a if e.op == "neg" else ~a
            return _wrap(v, e.dtype) if wrap else v
        if t is ir.Select:
            return ev(e.true_value) if ev(e.cond) else ev(e.false_value)
        if t is ir.Cast:
            v = ev(e.value)
            dt = e.dtype
            if dt.is_bool:
                return bool(v)
            if dt.is_int:  # an explicit conversion wraps like C, even without `wrap`
                v = int(math.trunc(v)) if isinstance(v, float) else int(v)
                return _wrap(v, dt)
            return float(v)
        if t is ir.Load:
            if load is None:
                raise KeyError(f"no value for a load of {e.buffer.name}")
            return load(e.buffer, tuple(ev(i) for i in e.indices))
        raise TypeError(f"cannot evaluate {type(e).__name__} {e}")

    return ev(ir.as_expr(expr))
