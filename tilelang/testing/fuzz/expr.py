"""Random element-wise expressions for generated `T.Parallel` bodies, with two renderings:
TileLang source text and a numpy evaluation that also bounds the rounding error.

An expression is a nested tuple: leaves ("F",) ("G",) ("R",) ("C",) (the tile, the second tile,
the row vector indexed by i, the column vector indexed by j) and ("k", value); inner nodes
(op, operand, ...). Float ops keep magnitudes bounded (inputs are in [-2, 2]); integer ops use
floor division/modulo by constants of both signs (TileLang's `//` and `%` are floor operations).

`evaluate(e, env, dtype)` returns (value, error bound) as float64 arrays, where the bound covers
the rounding of every operation in `dtype` (the fragment's dtype, or float32 for transcendental
functions) plus the error already carried by the leaves. Integer expressions are exact (int64).
"""

from __future__ import annotations

import numpy as np

from .case import EPS, TINY

FLOAT_CONSTS = (0.5, -0.75, 1.25, 2.0, -1.5, 0.125)
INT_CONSTS = (1, 2, 3, -2, 5, -7)
DIVISORS = (3, 4, -3, 5, -4, 7)
MASKS = (3, 6, 12, 7, -8)
# slack for CUDA's float32 exp/tanh (a few ulp) relative to the result
TRANSCENDENTAL = 8 * 2.0 ** -23

_LEAF_TEXT = {"F": "F[i, j]", "G": "G[i, j]", "R": "R[i]", "C": "C[j]"}


def random_expr(rng, leaves, is_int: bool, depth: int = 2):
    """A random expression over `leaves` (names from "F", "G", "R", "C")."""
    if depth == 0 or rng.random() < 0.25:
        if rng.random() < 0.2:
            return ("k", int(rng.choice(INT_CONSTS)) if is_int else float(rng.choice(FLOAT_CONSTS)))
        return (str(rng.choice(leaves)),)
    ops = INT_OPS if is_int else FLOAT_OPS
    op = str(rng.choice(ops))
    sub = lambda: random_expr(rng, leaves, is_int, depth - 1)  # noqa: E731
    if op in ("neg", "abs", "expn", "sig", "tanh"):
        return (op, sub())
    if op == "mulk":
        k = int(rng.choice(INT_CONSTS)) if is_int else float(rng.choice(FLOAT_CONSTS))
        return (op, sub(), k)
    if op in ("fdiv", "fmod"):
        return (op, sub(), int(rng.choice(DIVISORS)))
    if op in ("band", "bor", "bxor"):
        return (op, sub(), int(rng.choice(MASKS)))
    if op == "sel":
        exact = [x for x in leaves if x in ("G", "C")]  # never modified: the branch is exact
        if not exact:
            return ("max", sub(), sub())
        cond = str(rng.choice(exact))
        return (op, cond, float(rng.choice((0.0, 0.5, -0.5))) if not is_int else 0, sub(), sub())
    return (op, sub(), sub())


FLOAT_OPS = ("add", "sub", "mul", "max", "min", "neg", "abs", "expn", "sig", "tanh", "mulk",
             "sel")
INT_OPS = ("add", "sub", "max", "min", "mulk", "fdiv", "fmod", "band", "bor", "bxor", "sel",
           "neg", "abs")


def render(e) -> str:
    kind = e[0]
    if kind in _LEAF_TEXT:
        return _LEAF_TEXT[kind]
    if kind == "k":
        return repr(e[1])
    a = render(e[1]) if len(e) > 1 and isinstance(e[1], tuple) else None
    if kind == "neg":
        return f"(-{a})"
    if kind == "abs":
        return f"T.abs({a})"
    if kind == "expn":
        return f"T.exp(-T.abs({a}))"
    if kind == "sig":
        return f"T.sigmoid({a})"
    if kind == "tanh":
        return f"T.tanh({a})"
    if kind == "mulk":
        return f"({a} * {e[2]!r})"
    if kind == "fdiv":
        return f"({a} // {e[2]})"
    if kind == "fmod":
        return f"({a} % {e[2]})"
    if kind in ("band", "bor", "bxor"):
        sym = {"band": "&", "bor": "|", "bxor": "^"}[kind]
        return f"({a} {sym} {e[2]})"
    if kind == "sel":
        _, cond, thr, x, y = e
        return f"T.if_then_else({_LEAF_TEXT[cond]} > {thr!r}, {render(x)}, {render(y)})"
    b = render(e[2])
    if kind in ("max", "min"):
        return f"T.{kind}({a}, {b})"
    sym = {"add": "+", "sub": "-", "mul": "*"}[kind]
    return f"({a} {sym} {b})"


def count_ops(e) -> int:
    if e[0] in _LEAF_TEXT or e[0] == "k":
        return 0
    return 1 + sum(count_ops(x) for x in e[1:] if isinstance(x, tuple))


def uses(e, leaf: str) -> bool:
    if e[0] == leaf:
        return True
    if e[0] == "sel" and e[1] == leaf:
        return True
    return any(uses(x, leaf) for x in e[1:] if isinstance(x, tuple))


def evaluate(e, env: dict, dtype: str):
    """(value, error bound) of `e`; `env` maps leaf names to (value, error) arrays that
    broadcast against each other."""
    kind = e[0]
    if kind in _LEAF_TEXT:
        return env[kind]
    if kind == "k":
        return np.float64(e[1]) if dtype != "int32" else np.int64(e[1]), 0.0
    if dtype == "int32":
        return _eval_int(e, env), 0.0
    u, tiny = EPS[dtype], TINY[dtype]
    if kind == "sel":
        _, cond, thr, x, y = e
        c = env[cond][0] > thr
        (vx, ex), (vy, ey) = evaluate(x, env, dtype), evaluate(y, env, dtype)
        return np.where(c, vx, vy), np.where(c, ex, ey)
    va, ea = evaluate(e[1], env, dtype)
    if kind == "neg":
        return -va, ea
    if kind == "abs":
        return np.abs(va), ea
    if kind == "expn":
        v = np.exp(-np.abs(va))
        return v, ea * v + TRANSCENDENTAL * v + u * v + tiny
    if kind == "sig":
        v = 1.0 / (1.0 + np.exp(-va))
        return v, ea / 4 + TRANSCENDENTAL + u * v + tiny
    if kind == "tanh":
        v = np.tanh(va)
        return v, ea + TRANSCENDENTAL + u * np.abs(v) + tiny
    if kind == "mulk":
        v = va * e[2]
        return v, ea * abs(e[2]) + u * np.abs(v) + tiny
    vb, eb = evaluate(e[2], env, dtype)
    if kind == "add":
        v = va + vb
        return v, ea + eb + u * np.abs(v) + tiny
    if kind == "sub":
        v = va - vb
        return v, ea + eb + u * np.abs(v) + tiny
    if kind == "mul":
        v = va * vb
        return v, ea * np.abs(vb) + eb * np.abs(va) + ea * eb + u * np.abs(v) + tiny
    if kind == "max":
        return np.maximum(va, vb), np.maximum(ea, eb)
    if kind == "min":
        return np.minimum(va, vb), np.maximum(ea, eb)
    raise ValueError(f"unknown op {kind}")


def _eval_int(e, env):
    kind = e[0]
    if kind in _LEAF_TEXT:
        return env[kind][0]
    if kind == "k":
        return np.int64(e[1])
    if kind == "sel":
        _, cond, thr, x, y = e
        return np.where(env[cond][0] > thr, _eval_int(x, env), _eval_int(y, env))
    a = _eval_int(e[1], env)
    if kind == "neg":
        return -a
    if kind == "abs":
        return np.abs(a)
    if kind == "mulk":
        return a * e[2]
    if kind == "fdiv":
        return np.floor_divide(a, e[2])
    if kind == "fmod":
        return np.mod(a, e[2])
    if kind == "band":
        return np.bitwise_and(a, e[2])
    if kind == "bor":
        return np.bitwise_or(a, e[2])
    if kind == "bxor":
        return np.bitwise_xor(a, e[2])
    b = _eval_int(e[2], env)
    return {"add": np.add, "sub": np.subtract, "max": np.maximum, "min": np.minimum}[kind](a, b)
