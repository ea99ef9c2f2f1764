"""Expression simplifier (placeholder: constant folding only; replaced by the canonical-form
simplifier)."""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import Mutator


class _Fold(Mutator):
    def visit_Binary(self, node):
        a, b = self.visit(node.a), self.visit(node.b)
        if a is node.a and b is node.b and not (isinstance(a, ir.Const) and isinstance(b, ir.Const)):
            return node
        if node.op in ("min", "max", "truncdiv", "truncmod", "pow"):
            if isinstance(a, ir.Const) and isinstance(b, ir.Const):
                from ..ir.nodes import _fold_binary
                v = _fold_binary(node.op, a.value, b.value, node.dtype)
                if v is not None:
                    return ir.const(v, node.dtype)
            return ir.Binary(node.op, a, b, node.dtype)
        return ir.binary(node.op, a, b)


def simplify(expr):
    return _Fold().visit(expr)


def prove(cond) -> bool:
    e = simplify(cond)
    return isinstance(e, ir.Const) and bool(e.value)


def const_int_bound(expr):
    return None


class Analyzer:
    def simplify(self, e):
        return simplify(e)
