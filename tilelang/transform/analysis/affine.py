"""Integer expressions affine in a few loop variables, and their range over a loop box.

`split_affine(e, vars)` writes `e` as `sum(c_v * v) + rest` with constant integer coefficients
`c_v` and a `rest` free of `vars`; `holds_everywhere(cond, box)` turns a comparison of such
expressions into the condition (on `rest` alone) that it holds for every point of the box, and
`fails_everywhere` into the one that it holds for none. Passes use them to decide per block
(before a loop runs) what a per-element condition decides per element. The algebra is the
arithmetic analyzer's (`detect_linear`, `const_int_bound`); this module adds the box.
"""

from __future__ import annotations

from ...arith import Analyzer
from ...ir import nodes as ir


def split_affine(e, vars_):
    """({var: int coefficient}, rest) with e == sum(c * var) + rest, or None when `e` is not
    affine in `vars_` with constant integer coefficients (the analyzer's detect_linear, one
    variable after the other)."""
    analyzer, coeffs, rest = Analyzer(), {}, ir.as_expr(e)
    for v in vars_:
        linear = analyzer.detect_linear(rest, v)
        if linear is None or not isinstance(linear[0], int):
            return None
        if linear[0]:
            coeffs[v] = linear[0]
        rest = linear[1]
    return coeffs, rest


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


def constant_upper_bound(e, analyzer=None):
    """An int no value of the integer expression `e` exceeds (the analyzer's bound, with the
    ranges bound in `analyzer`, e.g. the block indices), else None:
    `T.min(T.ceildiv(4096, 128), bx + 1)` -> 32."""
    return (analyzer or Analyzer()).const_int_bound(e)[1]
