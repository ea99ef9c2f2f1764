"""Inline let bindings whose value is pure index arithmetic.

Expects: tile IR. Guarantees: every `LetStmt` whose value reads no memory and calls nothing
with side effects is removed and its variable substituted by the value, so later analyses
(layouts, bounds, vectorisation) see whole index expressions. Lets of loads stay: they fix
the moment a value is read.
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import Mutator, any_node


def is_pure(e) -> bool:
    return not any_node(e, lambda n: isinstance(n, ir.Load) or (
        isinstance(n, ir.Call) and (n.op in ir.SIDE_EFFECT_CALLS or ir.is_extern_call(n))))


class _Inline(Mutator):
    def __init__(self):
        self.env: dict = {}

    def visit_Var(self, v):
        return self.env.get(v, v)

    def visit_LetStmt(self, s):
        value = self.visit(s.value)
        if is_pure(value) and value.dtype.is_int:
            self.env[s.var] = value
            return self.visit(s.body)
        body = self.visit(s.body)
        if value is s.value and body is s.body:
            return s
        return ir.LetStmt(s.var, value, body, loc=s.loc)


def inline_pure_lets(stmt):
    return _Inline().visit(stmt)
