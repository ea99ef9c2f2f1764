"""Unroll a short serial loop whose variable moves a fragment index of a T.Parallel nest.

Expects: tile IR after `lower_elementwise_tile_ops` (copies and fills are parallel nests).

Guarantees: a `T.serial` loop (constant start and extent, at most MAX_TRIPS trips) whose
variable appears in a fragment index together with a variable of a T.Parallel nest inside it
(`acc[bi + s * 32, d]` with `s` serial, the sparse MLA backward's split store) is replaced by
its trips in sequence, the variable a constant in each. Which thread holds such an element
depends on both variables; with the serial one a constant, layout inference can lay each
nest out over the fragment's elements (a shifted loop) instead of staging the fragment
through shared memory. Nothing else changes: the trips run in the loop's order.
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import Mutator, collect, substitute

MAX_TRIPS = 8


def _vars(e):
    return {id(v) for v in collect(e, lambda n: isinstance(n, ir.Var))}


def _moves_fragment_index(loop: ir.For) -> bool:
    """Whether a parallel nest in `loop`'s body indexes a fragment by an expression that uses
    both `loop.var` and a variable of the nest."""
    target = id(loop.var)
    for nest in collect(loop.body, lambda n: isinstance(n, ir.For) and n.kind == "parallel"):
        pvars = {id(n.var) for n in collect(nest, lambda n: isinstance(n, ir.For)
                                            and n.kind == "parallel")}
        for acc in collect(nest, lambda n: isinstance(n, (ir.Load, ir.Store))):
            if acc.buffer.scope != "local.fragment":
                continue
            for idx in acc.indices:
                used = _vars(idx)
                if target in used and used & pvars:
                    return True
    return False


class _Unroll(Mutator):
    def visit_For(self, s):
        s = self.generic(s)
        if s.kind != "serial" or not isinstance(s.start, ir.Const) or \
                not isinstance(s.extent, ir.Const) or not 0 < s.extent.value <= MAX_TRIPS or \
                s.step != 1 or not _moves_fragment_index(s):
            return s
        start = s.start.value
        return ir.Seq(tuple(substitute(s.body, {s.var: ir.const(start + k, s.var.dtype)})
                            for k in range(s.extent.value)))


def unroll_fragment_offsets(stmt):
    return _Unroll().visit(stmt)
