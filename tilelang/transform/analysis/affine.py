"""Integer expressions affine in a few loop variables, and their range over a loop box.

`split_affine(e, vars)` writes `e` as `sum(c_v * v) + rest` with constant integer coefficients
`c_v` and a `rest` free of `vars`; `holds_everywhere(cond, box)` turns a comparison of such
expressions into the condition (on `rest` alone) that it holds for every point of the box, and
`fails_everywhere` into the one that it holds for none. Passes use them to decide per block
(before a loop runs) what a per-element condition decides per element.
"""

from __future__ import annotations

from ...ir import nodes as ir


def split_affine(e, vars_):
    """({var: int coefficient}, rest) with e == sum(c * var) + rest, or None when `e` is not
    affine in `vars_` with constant integer coefficients."""
    e = ir.as_expr(e)
    if isinstance(e, ir.Var):
        return ({e: 1}, ir.const(0, e.dtype)) if e in vars_ else ({}, e)
    if isinstance(e, ir.Const):
        return ({}, e) if e.dtype.is_int else None
    if isinstance(e, ir.Cast) and e.dtype.is_int and e.value.dtype.is_int:
        inner = split_affine(e.value, vars_)
        if inner is None or (inner[0] and e.dtype.bits < e.value.dtype.bits):
            return None  # a narrowing cast of a loop variable may wrap
        return inner[0], ir.cast_to(inner[1], e.dtype)
    if isinstance(e, ir.Unary) and e.op == "neg":
        inner = split_affine(e.a, vars_)
        return None if inner is None else (_scaled(inner[0], -1), ir.unary("neg", inner[1]))
    if not isinstance(e, ir.Binary) or not e.dtype.is_int:
        return _free_of(e, vars_)
    if e.op in ("add", "sub"):
        a, b = split_affine(e.a, vars_), split_affine(e.b, vars_)
        if a is None or b is None:
            return None
        sign = 1 if e.op == "add" else -1
        coeffs = dict(a[0])
        for v, c in b[0].items():
            coeffs[v] = coeffs.get(v, 0) + sign * c
        return {v: c for v, c in coeffs.items() if c}, ir.binary(e.op, a[1], b[1])
    if e.op == "mul":
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(y, ir.Const):
                inner = split_affine(x, vars_)
                if inner is None:
                    return None
                return _scaled(inner[0], int(y.value)), ir.binary("mul", inner[1], y)
    return _free_of(e, vars_)


def _scaled(coeffs, k):
    return {v: c * k for v, c in coeffs.items() if c * k}


def _free_of(e, vars_):
    """({}, e) when `e` reads none of `vars_`, else None (not affine in them)."""
    from ...ir.visitor import collect

    if any(v in vars_ for v in collect(e, lambda n: isinstance(n, ir.Var))):
        return None
    return {}, e


def _extreme(coeffs, rest, box, lowest: bool):
    """The least (or greatest) value of sum(c * v) + rest over `box` (var -> (start, extent),
    constant ints)."""
    total = rest
    for v, c in coeffs.items():
        start, extent = box[v]
        ends = (c * start, c * (start + extent - 1))
        total = ir.binary("add", total, ir.const(min(ends) if lowest else max(ends), rest.dtype))
    return total


_NEGATED = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt"}


def _difference(cond: ir.Compare, box):
    """(op, coeffs, rest) with cond == (sum(c * v) + rest  op  0), op in ge/gt/le/lt, or None."""
    if cond.op not in _NEGATED or not (cond.a.dtype.is_signed_int and cond.b.dtype.is_signed_int):
        # (unsigned differences wrap)
        return None
    parts = split_affine(ir.binary("sub", cond.a, cond.b), set(box))
    if parts is None:
        return None
    return cond.op, parts[0], parts[1]


def holds_everywhere(cond, box):
    """A condition free of the box's variables that implies `cond` at every point of `box`
    (var -> (start, extent) with constant ints), or None where none is derived. Comparisons
    of affine expressions are decided exactly; `and`s and `or`s of them soundly."""
    return _decided(cond, box, True)


def fails_everywhere(cond, box):
    """A condition free of the box's variables that implies `not cond` at every point of
    `box`, or None (the dual of holds_everywhere)."""
    return _decided(cond, box, False)


def _decided(cond, box, truth: bool):
    """holds_everywhere (truth) or fails_everywhere (not truth)."""
    if isinstance(cond, ir.Logical) and cond.op in ("and", "or"):
        a, b = _decided(cond.a, box, truth), _decided(cond.b, box, truth)
        # holding on the box needs both sides of an `and` to hold; failing, both sides of
        # an `or` to fail; either side suffices otherwise
        if (cond.op == "and") == truth:
            return None if a is None or b is None else ir.logical_and(a, b)
        if a is None and b is None:
            return None
        return a if b is None else b if a is None else ir.logical_or(a, b)
    if not isinstance(cond, ir.Compare) or cond.op not in _NEGATED:
        return None
    if not truth:
        cond = ir.Compare(_NEGATED[cond.op], cond.a, cond.b)
    diff = _difference(cond, box)
    if diff is None:
        return None
    op, coeffs, rest = diff
    zero = ir.const(0, rest.dtype)
    return ir.compare(op, _extreme(coeffs, rest, box, lowest=op in ("ge", "gt")), zero)


def constant_upper_bound(e, var_bounds=None):
    """An int no value of the integer expression `e` exceeds, where constants decide it
    (`T.min(T.ceildiv(4096, 128), bx + 1)` -> 32), else None. `var_bounds`: var -> the
    largest value it takes, for variables known to be non-negative (block indices)."""
    e = ir.as_expr(e)
    bounds = var_bounds or {}
    if isinstance(e, ir.Const):
        return int(e.value) if e.dtype.is_int else None
    if isinstance(e, ir.Var):
        return bounds.get(e)
    if isinstance(e, ir.Cast) and e.dtype.is_int:
        return constant_upper_bound(e.value, bounds)
    if not isinstance(e, ir.Binary):
        return None
    a, b = constant_upper_bound(e.a, bounds), constant_upper_bound(e.b, bounds)
    if e.op == "min":
        known = [x for x in (a, b) if x is not None]
        return min(known) if known else None
    if e.op in ("max", "add") and a is not None and b is not None:
        return max(a, b) if e.op == "max" else a + b
    if e.op == "mul" and a is not None and b is not None and _non_negative(e.a, bounds) \
            and _non_negative(e.b, bounds):
        return a * b
    if e.op == "sub" and a is not None and _non_negative(e.b, bounds):
        return a  # (a loop from a start >= 0 to an end: `end - start`)
    if e.op == "floordiv" and a is not None and isinstance(e.b, ir.Const) and int(e.b.value) > 0:
        return a // int(e.b.value)
    return None


def _non_negative(e, bounds) -> bool:
    """Whether `e` is a non-negative constant, or a sum / product of those and of `bounds`'
    variables."""
    if isinstance(e, ir.Const):
        return e.dtype.is_int and int(e.value) >= 0
    if isinstance(e, ir.Var):
        return e in bounds
    if isinstance(e, ir.Binary) and e.op == "max":
        return _non_negative(e.a, bounds) or _non_negative(e.b, bounds)
    if isinstance(e, ir.Binary) and e.op in ("add", "mul", "floordiv", "min"):
        return _non_negative(e.a, bounds) and _non_negative(e.b, bounds)
    return False
