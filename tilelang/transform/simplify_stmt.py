"""Simplify every integer expression of a lowered kernel with the ranges in scope, and drop
statements that do nothing (`if (true)` wrappers, empty sequences).

Expects: thread IR. Guarantees: the same program with simplified index arithmetic (the
simplifier preserves values and dtypes), no `If` with a constant condition, no nested or empty
`Seq`.
"""

from __future__ import annotations

from ..ir import nodes as ir
from .analysis.scoped import ScopedMutator

_EXPR = (ir.Binary, ir.Compare, ir.Logical, ir.Unary, ir.Select, ir.Cast)


class _Simplify(ScopedMutator):
    def _simp(self, e):
        if e.dtype.is_int or e.dtype.is_bool:
            return self.analyzer.simplify(e)
        return e

    def visit_Binary(self, e):
        return self._simp(self.generic(e))

    def visit_Compare(self, e):
        return self._simp(self.generic(e))

    def visit_Logical(self, e):
        return self._simp(self.generic(e))

    def visit_Select(self, e):
        e = self.generic(e)
        c = self.analyzer.simplify(e.cond)
        if isinstance(c, ir.Const):
            return e.true_value if c.value else e.false_value
        return e if c is e.cond else ir.Select(c, e.true_value, e.false_value, e.dtype)

    def visit_If(self, s):
        cond = self.visit(s.cond)
        if isinstance(cond, ir.Const):
            if cond.value:
                return self.visit(s.then_body)
            return self.visit(s.else_body) if s.else_body is not None else ir.Seq(())
        then = self.visit(s.then_body)
        other = self.visit(s.else_body) if s.else_body is not None else None
        return ir.If(cond, then, other, loc=s.loc)

    def visit_Seq(self, s):
        items = []
        for x in s.stmts:
            y = self.visit(x)
            if isinstance(y, ir.Seq):
                items.extend(y.stmts)
            else:
                items.append(y)
        if len(items) == 1:
            return items[0]
        return ir.Seq(tuple(items))

    def visit_For(self, s):
        extent = self.visit(s.extent)
        if isinstance(extent, ir.Const) and extent.value <= 0:
            return ir.Seq(())
        if isinstance(extent, ir.Const) and extent.value == 1 and s.step == 1:
            from ..ir.visitor import substitute

            return self.visit(substitute(s.body, {s.var: s.start}))
        return super().visit_For(s)


def simplify_kernel(kernel: ir.Kernel, ctx) -> ir.Kernel:
    return _Simplify().visit(kernel)
