"""Expression evaluation: `eval_int` for host-side shape arithmetic, and `ExprCompiler`, which
turns each IR expression once into a Python closure `fn(ctx) -> value`.

Closures are cached per node, so running a kernel never re-dispatches on node types. Values
follow `lanes.py` (numpy scalars when uniform, ndarrays when they vary over lanes) and are kept
in the storage type of their dtype (`numerics.py`): operations on bfloat16/float8 values are
computed in float32 and rounded. Integer arithmetic wraps like C (numpy), `//` and `%` are
floor division/modulo, `truncdiv`/`truncmod` round toward zero, float `min`/`max` ignore a NaN
operand (CUDA `fminf`/`fmaxf`). `&&`, `||` and select evaluate an operand only for the lanes
that need it, so a guarded out-of-range access in an unselected lane is no error.
"""

from __future__ import annotations

import numpy as np

from ..ir import nodes as ir
from ..ir.dtype import DType
from .lanes import EMPTY, VARYING, fail, mask_and, mask_andnot, scalar
from .memory import LocalStore, load_array
from .numerics import NARROW_FLOATS, const_value, convert, round_to

__all__ = ["eval_int", "ExprCompiler"]


# ---- host-side integer evaluation ---------------------------------------------------------------

def _floordiv(a, b):
    return a // b


def _truncdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


_INT_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "floordiv": _floordiv, "floormod": lambda a, b: a % b, "truncdiv": _truncdiv,
    "truncmod": lambda a, b: a - _truncdiv(a, b) * b, "min": min, "max": max,
    "bitand": lambda a, b: a & b, "bitor": lambda a, b: a | b, "bitxor": lambda a, b: a ^ b,
    "shl": lambda a, b: a << b, "shr": lambda a, b: a >> b,
}
_CMP_OPS = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
            "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}


def eval_int(expr, symbols: dict) -> int:
    """Evaluate an integer expression (shapes such as `(m + 31) // 32`) given the values of
    its Vars. Raises NameError naming any Var without a value."""
    if isinstance(expr, (bool, np.bool_)):
        return int(expr)
    if isinstance(expr, (int, np.integer)):
        return int(expr)
    if isinstance(expr, ir.Const):
        return int(expr.value)
    if isinstance(expr, ir.Var):
        if expr in symbols:
            return int(symbols[expr])
        raise NameError(f"symbolic size `{expr.name}` has no value: it is not bound by any "
                        f"argument (known: {', '.join(v.name for v in symbols) or 'none'})")
    if isinstance(expr, ir.Binary):
        a, b = eval_int(expr.a, symbols), eval_int(expr.b, symbols)
        op = _INT_OPS.get(expr.op)
        if op is None:
            raise ValueError(f"cannot evaluate `{expr.op}` in an integer size expression: {expr}")
        if expr.op in ("floordiv", "floormod", "truncdiv", "truncmod") and b == 0:
            raise ZeroDivisionError(f"division by zero while evaluating {expr}")
        return op(a, b)
    if isinstance(expr, ir.Compare):
        return int(_CMP_OPS[expr.op](eval_int(expr.a, symbols), eval_int(expr.b, symbols)))
    if isinstance(expr, ir.Logical):
        a = eval_int(expr.a, symbols)
        if expr.op == "and":
            return int(bool(a) and bool(eval_int(expr.b, symbols)))
        return int(bool(a) or bool(eval_int(expr.b, symbols)))
    if isinstance(expr, ir.Unary):
        a = eval_int(expr.a, symbols)
        return {"neg": -a, "not": int(not a), "bitnot": ~a}[expr.op]
    if isinstance(expr, ir.Select):
        c = eval_int(expr.cond, symbols)
        return eval_int(expr.true_value if c else expr.false_value, symbols)
    if isinstance(expr, ir.Cast):
        return eval_int(expr.value, symbols)
    if isinstance(expr, ir.Buffer):
        raise TypeError(f"buffer {expr.name} used in an integer size expression")
    raise TypeError(f"cannot evaluate {type(expr).__name__} `{expr}` as an integer size")


# ---- compiled closures ------------------------------------------------------------------------

def _truncdiv_np(a, b):
    r = np.fmod(a, b)
    return scalar(np.floor_divide(a - r, np.where(b == 0, 1, b)).astype(np.result_type(a, b)))


def _truncmod_np(a, b):
    return np.fmod(a, b)


_ARITH = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "floordiv": np.floor_divide, "floormod": np.remainder, "pow": np.power,
    "bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor,
    "shl": np.left_shift, "shr": np.right_shift,
    "truncdiv": _truncdiv_np, "truncmod": _truncmod_np,
}
_CMP = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "eq": np.equal, "ne": np.not_equal}


def rounding(fn, dtype: DType):
    """Wrap a float32-computing closure so that its result is rounded to a narrow float."""
    if dtype.name not in NARROW_FLOATS:
        return fn

    def f(ctx):
        return round_to(fn(ctx), dtype)
    return f


class ExprCompiler:
    """Compiles expressions to closures; the statement compiler extends it."""

    def __init__(self):
        self._memo: dict = {}
        self._keep: list = []  # nodes whose ids key the memo stay alive

    def expr(self, e):
        """The closure of expression `e` (cached)."""
        key = id(e)
        fn = self._memo.get(key)
        if fn is None:
            if not isinstance(e, ir.Expr):
                e = ir.as_expr(e)
            method = getattr(self, "_e_" + type(e).__name__, None)
            if method is None:
                raise NotImplementedError(f"the CPU interpreter cannot evaluate "
                                          f"{type(e).__name__} expressions ({e})")
            fn = method(e)
            self._memo[key] = fn
            self._keep.append(e)
        return fn

    def as_type(self, e, dtype: DType):
        """Closure of `e` converted to `dtype`."""
        fn = self.expr(e)
        src = ir.as_expr(e).dtype
        if src is dtype:
            return fn

        def f(ctx):
            return convert(fn(ctx), src, dtype)
        return f

    # ---- leaves ---------------------------------------------------------------------------
    def _e_Const(self, e):
        v = const_value(e.value, e.dtype)
        return lambda ctx: v

    def _e_Var(self, e):
        var = e

        def f(ctx):
            try:
                v = ctx.env[var]
            except KeyError:
                raise fail(ctx, NameError, f"variable `{var.name}` has no value here") from None
            if v is VARYING:
                raise fail(ctx, NotImplementedError,
                           f"`{var.name}` differs between threads and is used inside "
                           "T.Parallel, whose iterations have no fixed thread on the CPU "
                           "interpreter")
            return v
        return f

    def _e_Load(self, e):
        buf = e.buffer
        fidx = [self.expr(i) for i in e.indices]
        is_global = buf.scope == "global"
        zero = const_value(0, buf.dtype) if not buf.dtype.is_handle else 0
        local = buf.scope in ("local", "local.var")

        def get(ctx):
            try:
                return ctx.bufs[buf]
            except KeyError:
                raise fail(ctx, NameError, f"buffer {buf.name} is not allocated here") from None

        if local:
            def f(ctx):
                return get(ctx).load(ctx, tuple([fi(ctx) for fi in fidx]))
            return f
        if len(fidx) == 1:
            f0 = fidx[0]

            def f(ctx):
                st = get(ctx)
                return load_array(ctx, st, buf, (f0(ctx),), is_global,
                                  ctx.safe.get(buf, zero))
            return f
        if len(fidx) == 2:
            f0, f1 = fidx

            def f(ctx):
                st = get(ctx)
                return load_array(ctx, st, buf, (f0(ctx), f1(ctx)), is_global,
                                  ctx.safe.get(buf, zero))
            return f

        def f(ctx):
            st = get(ctx)
            if isinstance(st, LocalStore):
                return st.load(ctx, tuple([fi(ctx) for fi in fidx]))
            return load_array(ctx, st, buf, tuple([fi(ctx) for fi in fidx]), is_global,
                              ctx.safe.get(buf, zero))
        return f

    # ---- arithmetic -----------------------------------------------------------------------
    def _e_Binary(self, e):
        dt = e.dtype
        fa, fb = self.as_type(e.a, dt), self.as_type(e.b, dt)
        if e.op in ("min", "max"):
            if dt.is_float:
                op = np.fmin if e.op == "min" else np.fmax
            else:
                op = np.minimum if e.op == "min" else np.maximum
        else:
            op = _ARITH.get(e.op)
            if op is None:
                raise NotImplementedError(f"the CPU interpreter has no binary operator "
                                          f"`{e.op}`")
        if e.op in ("floordiv", "floormod", "truncdiv", "truncmod") and dt.is_float:
            op = {"floordiv": lambda a, b: np.floor(a / b), "floormod": np.remainder,
                  "truncdiv": lambda a, b: np.trunc(a / b), "truncmod": np.fmod}[e.op]
        if dt.is_bool and e.op in ("min", "max"):
            op = np.logical_and if e.op == "min" else np.logical_or

        def f(ctx):
            return op(fa(ctx), fb(ctx))
        return rounding(f, dt)

    def _e_Compare(self, e):
        dt = ir.promote(e.a.dtype, e.b.dtype)
        fa, fb = self.as_type(e.a, dt), self.as_type(e.b, dt)
        op = _CMP[e.op]

        def f(ctx):
            return op(fa(ctx), fb(ctx))
        return f

    def _e_Logical(self, e):
        fa, fb = self.as_type(e.a, ir.BOOL), self.as_type(e.b, ir.BOOL)
        is_and = e.op == "and"

        def f(ctx):
            a = fa(ctx)
            if type(a) is not np.ndarray or a.ndim == 0:
                if bool(a) != is_and:  # short-circuit: `false && _`, `true || _`
                    return np.bool_(bool(a))
                return fb(ctx)
            outer = ctx.mask
            sub = mask_and(outer, a) if is_and else mask_andnot(outer, a)
            if sub is EMPTY:
                return a
            ctx.mask = sub
            try:
                b = fb(ctx)
            finally:
                ctx.mask = outer
            return np.logical_and(a, b) if is_and else np.logical_or(a, b)
        return f

    def _e_Unary(self, e):
        fa = self.as_type(e.a, e.dtype)
        if e.op == "neg":
            op = np.negative
        elif e.op == "not":
            op = np.logical_not
        elif e.op == "bitnot":
            op = np.invert
        else:
            raise NotImplementedError(f"the CPU interpreter has no unary operator `{e.op}`")

        def f(ctx):
            return op(fa(ctx))
        return f

    def _e_Select(self, e):
        fc = self.as_type(e.cond, ir.BOOL)
        ft, ff = self.as_type(e.true_value, e.dtype), self.as_type(e.false_value, e.dtype)
        npdt = e.dtype.numpy

        def f(ctx):
            c = fc(ctx)
            if type(c) is not np.ndarray or c.ndim == 0:
                return ft(ctx) if c else ff(ctx)
            outer = ctx.mask
            tm, fm = mask_and(outer, c), mask_andnot(outer, c)
            try:
                if tm is EMPTY:
                    ctx.mask = fm
                    return ff(ctx)
                if fm is EMPTY:
                    ctx.mask = tm
                    return ft(ctx)
                ctx.mask = tm
                t = ft(ctx)
                ctx.mask = fm
                fv = ff(ctx)
            finally:
                ctx.mask = outer
            return np.where(c, t, fv).astype(npdt, copy=False)
        return f

    def _e_Cast(self, e):
        fv = self.expr(e.value)
        src, dst = e.value.dtype, e.dtype
        if src is dst:
            return fv
        if (src.is_int and dst.is_int and dst.bits >= 8) or (src.is_float and dst.is_float and
                                          dst.name not in NARROW_FLOATS) or \
                (src.is_bool and not dst.is_bool and dst.name not in NARROW_FLOATS) or \
                (src.is_int and dst.is_float and dst.name not in NARROW_FLOATS):
            npdt = dst.numpy

            def f(ctx):
                return fv(ctx).astype(npdt)
            return f

        def g(ctx):
            return convert(fv(ctx), src, dst)
        return g

    def _e_Call(self, e):
        from .intrinsics import compile_call

        return compile_call(self, e, want_value=True)

    def _e_Buffer(self, e):
        if e.scope == "local.var":
            return self.expr(ir.Load(e, (ir.const(0),), e.dtype))
        raise NotImplementedError(f"buffer {e.name} used as a value")
