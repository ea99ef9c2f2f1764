"""Test helper: evaluate layout index expressions (IR) with numpy, independently of any pass."""

import numpy as np

from tilelang.ir import nodes as ir

_BIN = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b,
    "bitxor": lambda a, b: a ^ b, "bitand": lambda a, b: a & b, "bitor": lambda a, b: a | b,
    "shl": lambda a, b: a << b, "shr": lambda a, b: a >> b,
    "min": np.minimum, "max": np.maximum,
}
_CMP = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "eq": np.equal, "ne": np.not_equal}


def evaluate(e, env):
    """Value of `e` with variables bound by name in `env` (ints or numpy arrays)."""
    if isinstance(e, (bool, int, np.integer, np.ndarray)):
        return e
    if isinstance(e, ir.Const):
        return e.value
    if isinstance(e, ir.Var):
        return env[e.name]
    if isinstance(e, ir.Binary):
        return _BIN[e.op](evaluate(e.a, env), evaluate(e.b, env))
    if isinstance(e, ir.Compare):
        return _CMP[e.op](evaluate(e.a, env), evaluate(e.b, env))
    if isinstance(e, ir.Logical):
        f = np.logical_and if e.op == "and" else np.logical_or
        return f(evaluate(e.a, env), evaluate(e.b, env))
    if isinstance(e, ir.Unary):
        a = evaluate(e.a, env)
        return {"neg": lambda: -a, "not": lambda: np.logical_not(a), "bitnot": lambda: ~a}[e.op]()
    if isinstance(e, ir.Select):
        return np.where(evaluate(e.cond, env), evaluate(e.true_value, env),
                        evaluate(e.false_value, env))
    raise TypeError(f"cannot evaluate {type(e).__name__}: {e}")
