"""A `Mutator` that keeps an `Analyzer` informed of the ranges of the variables in scope:
block and thread indices inside a kernel, loop variables inside their loops, and inside the
branches of an `if` the bounds its condition puts on them (`if k < n - 1:` around a
pipeline's prefetch: the copies of the next stage are then provably in bounds), and inside
an `Attr("assume")` (T.assume) its condition, as a fact and as bounds. Passes that need
proofs (bounds guards, vector widths) derive from it."""

from __future__ import annotations

from contextlib import contextmanager

from ...arith import Analyzer
from ...ir import nodes as ir
from ...ir.visitor import Mutator


def bind_kernel_vars(analyzer: Analyzer, k: ir.Kernel):
    for v, g in zip(k.block_vars, k.grid):
        analyzer.bind(v, 0, g)
    for v, t in zip(k.thread_vars, k.threads):
        analyzer.bind(v, 0, t)


class ScopedMutator(Mutator):
    def __init__(self, analyzer: Analyzer = None):
        self.analyzer = analyzer or Analyzer()

    def visit_Kernel(self, s):
        with self.analyzer.scope():
            bind_kernel_vars(self.analyzer, s)
            return self.generic(s)

    def visit_For(self, s):
        with self.analyzer.scope():
            if s.step == 1:
                self.analyzer.bind(s.var, s.start, s.extent)
            elif s.step > 0:
                last = ir.binary("add", s.start, ir.binary("mul", ir.binary("sub", s.extent, 1),
                                                           s.step))
                self.analyzer.bind_range(s.var, s.start, last)
            return self.generic(s)

    def visit_If(self, s):
        cond = self.visit(s.cond)
        with self.assuming(cond):
            then = self.visit(s.then_body)
        other = None
        if s.else_body is not None:
            with self.assuming(ir.logical_not(cond)):
                other = self.visit(s.else_body)
        if cond is s.cond and then is s.then_body and other is s.else_body:
            return s
        return ir.If(cond, then, other, loc=s.loc)

    def visit_Attr(self, s):
        if s.key != "assume":
            return self.generic(s)
        # T.assume: the rest of the block may rely on the condition (the user's promise)
        with self.assuming(s.value):
            self.analyzer.assume(s.value)
            body = self.visit(s.body)
        return s if body is s.body else ir.Attr(s.key, s.value, body, loc=s.loc)

    @contextmanager
    def assuming(self, cond):
        """Inside the block, the bound variables compared in `cond` (a conjunction of
        comparisons with a variable on one side) have the ranges `cond` implies."""
        with self.analyzer.scope():
            # simplified, `min(j + 233, tx + 2) < M` is `tx + 2 < M` where j >= 0 and tx < 32
            simple = self.analyzer.simplify(cond)
            bounds = var_bounds(cond) + (var_bounds(simple) if simple is not cond else [])
            for var, lo, hi in bounds:
                old = self.analyzer.range_of(var)
                if old is None:
                    continue
                self.analyzer.bind_range(var, _tighter("max", old[0], lo),
                                         _tighter("min", old[1], hi))
            yield


def var_bounds(cond):
    """[(var, lo, hi)]: inclusive bounds (None: none on that side) that `cond` being true puts
    on variables compared against expressions in it, through `and`."""
    if isinstance(cond, ir.Logical) and cond.op == "and":
        return var_bounds(cond.a) + var_bounds(cond.b)
    if isinstance(cond, ir.Unary) and cond.op == "not" and isinstance(cond.a, ir.Compare):
        flip = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt"}.get(cond.a.op)
        return var_bounds(ir.Compare(flip, cond.a.a, cond.a.b)) if flip else []
    if not isinstance(cond, ir.Compare) or not cond.a.dtype.is_int:
        return []
    op, left, other = cond.op, _var_plus_const(cond.a), cond.b
    if left is None:  # e op var + c: var + c (flipped op) e
        left, other = _var_plus_const(cond.b), cond.a
        op = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}.get(op)
        if left is None:
            return []
    a, c = left
    b = ir.binary("sub", other, c) if c else other  # var + c op e  <=>  var op e - c
    if op == "lt":
        return [(a, None, ir.binary("sub", b, 1))]
    if op == "le":
        return [(a, None, b)]
    if op == "gt":
        return [(a, ir.binary("add", b, 1), None)]
    if op == "ge":
        return [(a, b, None)]
    return []


def _var_plus_const(e):
    """(var, c) when `e` is `var`, `var + c` or `var - c` for an int constant c, else None
    (the pipeline guards its prefetch with `k + 1 < n`)."""
    if isinstance(e, ir.Var):
        return e, 0
    if isinstance(e, ir.Binary) and e.op in ("add", "sub") and isinstance(e.a, ir.Var) and \
            isinstance(e.b, ir.Const) and isinstance(e.b.value, int):
        return e.a, e.b.value if e.op == "add" else -e.b.value
    return None


def _tighter(op, old, new):
    if new is None:
        return old
    if old is None:
        return new
    return ir.binary(op, old, new)
