"""A `Mutator` that keeps an `Analyzer` informed of the ranges of the variables in scope:
block and thread indices inside a kernel, loop variables inside their loops. Passes that need
proofs (bounds guards, vector widths) derive from it."""

from __future__ import annotations

from ..arith import Analyzer
from ..ir import nodes as ir
from ..ir.visitor import Mutator


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
