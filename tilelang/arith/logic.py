"""Simplification of everything that is not int32/int64 arithmetic: comparisons, logic,
selects, casts, loads, calls, and float/bool/narrow-int arithmetic.

Integer comparisons are decided from the bound of the difference of their sides and otherwise
normalised (`a < b` becomes `P + k < N` with P, N sums of positive terms and the common factor
of the coefficients divided out). Float arithmetic is only constant-folded and stripped of
identities that are exact in IEEE arithmetic (x * 1, x / 1, x - 0; x + 0 as the IR builder
already does); it is never reassociated. `not (a < b)` becomes `a >= b` only for integers
(NaN makes it false for floats).
"""

from __future__ import annotations

from math import gcd

from ..ir import nodes as ir
from . import atoms as A
from . import bounds as B
from . import canonical as C

Const, Compare, Logical, Unary = ir.Const, ir.Compare, ir.Logical, ir.Unary
TRUE, FALSE = ir.Const(True, ir.BOOL), ir.Const(False, ir.BOOL)
_INVERT = {"lt": "ge", "ge": "lt", "le": "gt", "gt": "le", "eq": "ne", "ne": "eq"}


def _bool(v) -> Const:
    return TRUE if v else FALSE


def simplify_node(ana, e):
    """Simplify `e` by its own kind (children through `ana._simp`)."""
    t = type(e)
    if t is Const or t is ir.Var:
        return e
    if t is ir.Binary:
        return _binary(ana, e)
    if t is Compare:
        return simplify_compare(ana, e)
    if t is Logical:
        return _logical(ana, e)
    if t is Unary:
        return _unary(ana, e)
    if t is ir.Select:
        return _select(ana, e)
    if t is ir.Cast:
        return _cast(ana, e)
    if t is ir.Load:
        idx = tuple(ana._simp(i) for i in e.indices)
        if all(x is y for x, y in zip(idx, e.indices)):
            return e
        return ir.Load(e.buffer, idx, e.dtype)
    if t is ir.Call:
        args = tuple(ana._simp(a) if isinstance(a, ir.Expr) else a for a in e.args)
        if e.op == "abs" and type(args[0]) is Const and e.dtype.is_int:
            return ir.const(abs(args[0].value), e.dtype)
        if all(x is y for x, y in zip(args, e.args)):
            return e
        return ir.Call(e.op, args, e.dtype, e.attrs)
    return e


def _is_val(e, v) -> bool:
    return type(e) is Const and not e.dtype.is_bool and e.value == v


def _binary(ana, e):
    a, b = ana._simp(e.a), ana._simp(e.b)
    op, dt = e.op, e.dtype
    if type(a) is Const and type(b) is Const and not (
            op in ("min", "max") and dt.is_float and (a.value != a.value or b.value != b.value)):
        # (min/max with a NaN operand are left to the target's fmin/fmax semantics)
        try:
            v = ir._fold_binary(op, a.value, b.value, dt)
            if v is not None:
                return ir.const(v, dt)
        except (OverflowError, ValueError, ZeroDivisionError, TypeError):
            pass
    if dt.is_bool:
        # bool & | ^ with a constant operand
        for x, y in ((a, b), (b, a)):
            if type(y) is Const:
                if op == "bitand":
                    return x if y.value else FALSE
                if op == "bitor":
                    return TRUE if y.value else x
                if op == "bitxor" and not y.value:
                    return x
    elif op == "add":
        if _is_val(b, 0):
            return a
        if _is_val(a, 0):
            return b
    elif op == "sub":
        if _is_val(b, 0):
            return a
    elif op == "mul":
        if _is_val(b, 1):
            return a
        if _is_val(a, 1):
            return b
        if dt.is_int and (_is_val(a, 0) or _is_val(b, 0)):
            return ir.const(0, dt)
    elif op in ("div", "floordiv", "truncdiv"):
        if _is_val(b, 1):
            return a
    elif op in ("floormod", "truncmod"):
        if _is_val(b, 1) and dt.is_int:
            return ir.const(0, dt)
    elif op in ("min", "max"):
        if A.expr_key(a) == A.expr_key(b):
            return a
    if a is e.a and b is e.b:
        return e
    return ir.Binary(op, a, b, dt)


# ---- comparisons -------------------------------------------------------------------------------


def _decide(op, ab, bb):
    """Decide `a op b` from the bounds of both sides, or None."""
    alo, ahi = ab
    blo, bhi = bb
    lt = ahi is not None and blo is not None and ahi < blo      # always a < b
    ge = alo is not None and bhi is not None and alo >= bhi     # always a >= b
    le = ahi is not None and blo is not None and ahi <= blo
    gt = alo is not None and bhi is not None and alo > bhi
    if op == "lt":
        return True if lt else False if ge else None
    if op == "le":
        return True if le else False if gt else None
    if op == "gt":
        return True if gt else False if le else None
    if op == "ge":
        return True if ge else False if lt else None
    if op == "eq":
        if lt or gt:
            return False
        return True if alo is not None and alo == ahi == blo == bhi else None
    if op == "ne":
        if lt or gt:
            return True
        return False if alo is not None and alo == ahi == blo == bhi else None
    return None


def simplify_compare(ana, e):
    a, b = e.a, e.b
    dt = a.dtype
    if C.is_canon(dt) and b.dtype is dt:
        return int_compare(ana, e.op, C.to_sum(ana, a), C.to_sum(ana, b), dt)
    a2, b2 = ana._simp(a), ana._simp(b)
    if type(a2) is Const and type(b2) is Const:
        return _bool(ir._CMP_FOLD[e.op](a2.value, b2.value))
    if not dt.is_float and A.expr_key(a2) == A.expr_key(b2):
        return _bool(e.op in ("eq", "le", "ge"))
    if dt.is_int or dt.is_bool:
        d = _decide(e.op, ana._expr_bound(a2), ana._expr_bound(b2))
        if d is not None:
            return _bool(d)
    if a2 is a and b2 is b:
        return e
    return Compare(e.op, a2, b2)


def _gcd_terms(s) -> int:
    g = 0
    for m, k in s.items():
        if m:
            g = gcd(g, k)
            if g == 1:
                break
    return g


def _bound(ana, s):
    """Bound of s, sharpened with the symbolic ranges when there are any."""
    if ana._sym:
        return B.sym_bound(ana, s)
    return B.sum_bound(ana, s)


def _split(s):
    """(positive terms, negated negative terms, constant) of a sum."""
    p, n = {}, {}
    for m, k in s.items():
        if m:
            if k > 0:
                p[m] = k
            else:
                n[m] = -k
    return p, n, s.get((), 0)


def le_form(op, sa, sb):
    """The sum E with `a op b` <=> `E <= 0`, for op in lt le gt ge."""
    if op == "lt":
        return A.s_add_const(A.s_sub(sa, sb), 1)
    if op == "le":
        return A.s_sub(sa, sb)
    if op == "gt":
        return A.s_add_const(A.s_sub(sb, sa), 1)
    return A.s_sub(sb, sa)


def int_compare(ana, op, sa, sb, dt):
    render = A.render
    if op in ("eq", "ne"):
        d = A.s_sub(sa, sb)
        if A.is_const(d):
            return _bool((A.const_of(d) == 0) == (op == "eq"))
        g = _gcd_terms(d)
        k = d.get((), 0)
        if k % g:  # g*x == k has no integer solution
            return _bool(op == "ne")
        if g > 1:
            d = {m: v // g for m, v in d.items()}
        lo, hi = _bound(ana, d)
        if (lo is not None and lo > 0) or (hi is not None and hi < 0):
            return _bool(op == "ne")
        if lo == 0 and hi == 0:
            return _bool(op == "eq")
        p, n, k = _split(d)
        if not p:
            p, n, k = n, p, -k
        if k > 0:
            return Compare(op, render(A.s_add_const(p, k), dt), render(n, dt))
        return Compare(op, render(p, dt), render(A.s_add_const(n, -k), dt))
    e = le_form(op, sa, sb)
    if A.is_const(e):
        return _bool(A.const_of(e) <= 0)
    lo, hi = _bound(ana, e)
    if hi is not None and hi <= 0:
        return TRUE
    if lo is not None and lo > 0:
        return FALSE
    g = _gcd_terms(e)
    if g > 1:  # g*x + k <= 0  <=>  x + ceil(k / g) <= 0
        k = e.get((), 0)
        e = {m: v // g for m, v in e.items() if m}
        if -(-k // g):
            e[()] = -(-k // g)
    p, n, k = _split(e)
    if p:  # P - N + k <= 0  <=>  P + (k - 1) < N
        if k - 1 > 0:
            return Compare("lt", render(A.s_add_const(p, k - 1), dt), render(n, dt))
        return Compare("lt", render(p, dt), render(A.s_add_const(n, 1 - k), dt))
    # N >= k
    if k >= 1:
        return Compare("gt", render(n, dt), A.mk_const(k - 1, dt))
    return Compare("ge", render(n, dt), A.mk_const(k, dt))


def _linear_le(ana, c):
    """E with `c` <=> E <= 0 for an integer ordering comparison, else None."""
    if type(c) is Compare and c.op in ("lt", "le", "gt", "ge"):
        dt = c.a.dtype
        if C.is_canon(dt) and c.b.dtype is dt:
            return le_form(c.op, C.to_sum(ana, c.a), C.to_sum(ana, c.b))
    return None


# ---- logic -----------------------------------------------------------------------------------


def _logical(ana, e):
    a = ana._simp(e.a)
    is_and = e.op == "and"
    if type(a) is Const:
        if bool(a.value) == is_and:  # True and b -> b;  False or b -> b
            return ana._simp(e.b)
        return a
    b = ana._simp(e.b)
    if type(b) is Const:
        return a if bool(b.value) == is_and else b
    if A.expr_key(a) == A.expr_key(b):
        return a
    ea = _linear_le(ana, a)
    if ea is not None:
        eb = _linear_le(ana, b)
        if eb is not None:
            d = A.s_sub(ea, eb)
            if A.is_const(d):  # same terms: one condition implies the other
                implies_b = A.const_of(d) >= 0  # ea <= 0 implies eb <= 0
                if is_and:
                    return a if implies_b else b
                return b if implies_b else a
            t = A.s_add(ea, eb)
            if A.is_const(t):
                if is_and and A.const_of(t) > 0:
                    return FALSE  # both <= 0 would make their sum <= 0
                if not is_and and A.const_of(t) <= 1:
                    return TRUE  # ea > 0 forces eb <= 0
    if a is e.a and b is e.b:
        return e
    return Logical(e.op, a, b)


def _unary(ana, e):
    a = ana._simp(e.a)
    op = e.op
    if op == "not":
        if type(a) is Const:
            return _bool(not a.value)
        if type(a) is Unary and a.op == "not":
            return a.a
        if type(a) is Compare and not a.a.dtype.is_float:
            return simplify_compare(ana, Compare(_INVERT[a.op], a.a, a.b))
        return e if a is e.a else Unary("not", a, e.dtype)
    if type(a) is Const:
        try:
            if op == "neg":
                return ir.const(-a.value, e.dtype)
            if op == "bitnot" and not a.dtype.is_float:
                return ir.const(~int(a.value), e.dtype)
        except (OverflowError, ValueError, TypeError):
            pass
    if op == "neg" and type(a) is Unary and a.op == "neg":
        return a.a
    return e if a is e.a else Unary(op, a, e.dtype)


def _select(ana, e):
    cond = ana._simp(e.cond)
    if type(cond) is Const:
        return ana._simp(e.true_value if cond.value else e.false_value)
    a, b = ana._simp(e.true_value), ana._simp(e.false_value)
    if A.expr_key(a) == A.expr_key(b):
        return a
    if cond is e.cond and a is e.true_value and b is e.false_value:
        return e
    return ir.Select(cond, a, b, e.dtype)


def _cast(ana, e):
    v = ana._simp(e.value)
    if v.dtype is e.dtype:
        return v
    if type(v) is Const:
        try:
            return ir.const(v.value, e.dtype)
        except (OverflowError, ValueError, TypeError):
            pass
    return e if v is e.value else ir.Cast(v, e.dtype)
