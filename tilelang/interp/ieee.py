"""The IEEE operations with an explicit rounding mode (`T.ieee_add(x, y, "rz")`, ...) on the
CPU interpreter.

Guarantees: each result is the exact result of the operation (sum, difference, product,
fused multiply-add, quotient, reciprocal, square root, reciprocal square root) rounded once
to the operation's dtype (float16, bfloat16, float32 or float64, subnormals included) in the
requested direction: "rn" nearest with ties to even, "rz" toward zero, "ru" toward +inf,
"rd" toward -inf; what CUDA's `__fadd_rz`, `__dmul_ru`, `__frsqrt_rn`, `__hadd`, ... return.
Overflow gives infinity or the largest finite value as the direction says. NaN and infinite
operands, and division by zero, follow IEEE (the same in every mode).

numpy has no directed rounding, so every element is computed exactly with `fractions.Fraction`
(square roots with integer square roots): slow, but exact. Interpreted kernels are small.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..ir import nodes as ir
from ..ir.dtype import DType

__all__ = ["IEEE_OPS", "compile_ieee", "round_exact"]

# significand bits (with the hidden one), smallest and largest normal exponent
_FORMATS = {"float64": (53, -1022, 1023), "float32": (24, -126, 127),
            "float16": (11, -14, 15), "bfloat16": (8, -126, 127)}

IEEE_OPS = frozenset({"ieee_add", "ieee_sub", "ieee_mul", "ieee_fmaf", "ieee_fdiv",
                      "ieee_frcp", "ieee_fsqrt", "ieee_frsqrt"})

_HALF = Fraction(1, 2)


def _floor_log2(q: Fraction) -> int:
    """e with 2**e <= q < 2**(e+1), for q > 0."""
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if q < Fraction(2) ** e:
        e -= 1
    elif q >= Fraction(2) ** (e + 1):
        e += 1
    return e


def round_exact(q: Fraction, dtype_name: str, mode: str, sqrt: bool = False) -> float:
    """`q` (or `sqrt(q)` when `sqrt`; q >= 0 then) rounded to the format of `dtype_name` in
    direction `mode`, as a Python float (exact: every value of these formats is a double)."""
    p, emin, emax = _FORMATS[dtype_name]
    if q == 0:
        return -0.0 if mode == "rd" and not sqrt else 0.0
    neg = q < 0
    a = -q if neg else q
    e = _floor_log2(a)
    if sqrt:
        e //= 2  # sqrt(a) lies in [2**(e//2), 2**(e//2 + 1))
    e = max(e, emin)  # subnormals share the smallest exponent
    ulp = Fraction(2) ** (e - p + 1)
    if sqrt:
        x = a / (ulp * ulp)  # sqrt(a) / ulp = sqrt(x)
        k = math.isqrt(math.floor(x))
        exact = k * k == x
        half = (k + _HALF) ** 2
        above_half, at_half = x > half, x == half
    else:
        m = a / ulp
        k = math.floor(m)
        rem = m - k
        exact = rem == 0
        above_half, at_half = rem > _HALF, rem == _HALF
    if exact:
        up = False
    elif mode == "rn":
        up = above_half or (at_half and k % 2 == 1)
    elif mode == "rz":
        up = False
    elif mode == "ru":
        up = not neg
    else:  # "rd"
        up = neg
    value = (k + up) * ulp
    largest = (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax
    if value > largest:
        to_inf = mode == "rn" or (mode == "ru" and not neg) or (mode == "rd" and neg)
        return -math.inf if neg and to_inf else math.inf if to_inf else \
            -float(largest) if neg else float(largest)
    return -float(value) if neg else float(value)


def _exact_result(op: str, xs):
    """(Fraction, is_sqrt) of the operation on finite operands, or None when IEEE special
    cases apply (non-finite operands, division by zero, square root of a negative number)."""
    if not all(math.isfinite(x) for x in xs):
        return None
    f = [Fraction(x) for x in xs]
    if op == "ieee_add":
        return f[0] + f[1], False
    if op == "ieee_sub":
        return f[0] - f[1], False
    if op == "ieee_mul":
        return f[0] * f[1], False
    if op == "ieee_fmaf":
        return f[0] * f[1] + f[2], False
    if op == "ieee_fdiv":
        return (f[0] / f[1], False) if f[1] != 0 else None
    if op == "ieee_frcp":
        return (1 / f[0], False) if f[0] != 0 else None
    if op == "ieee_fsqrt":
        return (f[0], True) if f[0] > 0 else None
    return (1 / f[0], True) if f[0] > 0 else None  # ieee_frsqrt


def _special(op: str, xs) -> float:
    """IEEE results where some operand is not finite, or the operation has none (float64
    arithmetic gives the same NaN / infinities / signed zeros in every rounding mode)."""
    a = [np.float64(x) for x in xs]
    with np.errstate(all="ignore"):
        if op == "ieee_add":
            return a[0] + a[1]
        if op == "ieee_sub":
            return a[0] - a[1]
        if op == "ieee_mul":
            return a[0] * a[1]
        if op == "ieee_fmaf":
            return a[0] * a[1] + a[2]
        if op == "ieee_fdiv":
            return a[0] / a[1]
        if op == "ieee_frcp":
            return np.float64(1) / a[0]
        if op == "ieee_fsqrt":
            return np.sqrt(a[0])
        return np.float64(1) / np.sqrt(a[0])


def _element(op: str, dtype_name: str, mode: str, *xs) -> float:
    xs = [float(x) for x in xs]
    exact = _exact_result(op, xs)
    if exact is None:
        return float(_special(op, xs))
    q, is_sqrt = exact
    if q == 0:
        return _signed_zero(op, mode, xs)
    return round_exact(q, dtype_name, mode, sqrt=is_sqrt)


def _signed_zero(op: str, mode: str, xs) -> float:
    """The sign of an exactly zero result: a product or quotient takes the operands' signs
    (float64 gets it right); an exactly zero sum of two addends is +0, except -0 when both
    addends are -0, or, rounding toward -inf ("rd"), unless both are +0 (IEEE 754 §6.3)."""
    if op in ("ieee_add", "ieee_sub", "ieee_fmaf"):
        if op == "ieee_add":
            u, v = xs[0], xs[1]
        elif op == "ieee_sub":
            u, v = xs[0], -xs[1]
        else:
            u, v = xs[0] * xs[1], xs[2]
        neg_u, neg_v = math.copysign(1, u) < 0, math.copysign(1, v) < 0
        if u == 0 and v == 0 and neg_u == neg_v:
            return -0.0 if neg_u else 0.0
        return -0.0 if mode == "rd" else 0.0
    return float(_special(op, xs))


def compile_ieee(c, e: ir.Call):
    """The interpreter closure of one `ieee_*` call."""
    dt: DType = e.dtype
    mode = dict(e.attrs).get("rounding_mode", "rn")
    args = [c.as_type(a, dt) for a in e.args]
    element = np.frompyfunc(lambda *xs: _element(e.op, dt.name, mode, *xs), len(args), 1)
    storage = np.dtype(dt.numpy)

    def run(ctx):
        values = [np.asarray(f(ctx)) for f in args]
        out = np.asarray(element(*values), dtype=np.float64).astype(storage)
        return out[()] if out.ndim == 0 else out

    return run
