"""Recognise element-wise `T.Parallel` loads of a global tile into shared memory as `T.copy`.

    for k, j in T.Parallel(BK, BN):
        B_shared[k, j] = B[ko * BK + k, bx * BN + j]      ==   T.copy(B[ko*BK, bx*BN], B_shared)

Written as a loop, the load is synchronous: a `T.Pipelined` loop cannot prefetch it and the
Hopper path cannot turn it into TMA. As a copy, it gets cp.async stages or TMA like any other.

Expects: tile IR after `inline_pure_lets` (whole index expressions). Guarantees: a parallel
nest (no annotations) whose whole body is one store `S[i0 + a0, ...] = cast?(G[...])` into a
shared buffer, where every loop variable appears with coefficient 1 in exactly one index of
each side, in the same order, no other index depends on the loop, loops start at 0 and the
shared window is provably inside `S`, becomes one `ir.Copy` of the same elements. The result
is unchanged: both forms read 0 outside the global tensor (SEMANTICS.md §3.7) and cast per
element. Anything else is left as written.
"""

from __future__ import annotations

from ..arith import Analyzer
from ..ir import nodes as ir
from ..ir.visitor import Mutator
from .analysis.parallel_nest import match_indices, parallel_nest
from .analysis.scopes import SHARED


class _Recognise(Mutator):
    def __init__(self):
        self.analyzer = Analyzer()

    def visit_For(self, s):
        if s.kind == "parallel":
            copy = self._as_copy(s)
            if copy is not None:
                return copy
            return s  # a parallel nest contains no further parallel nests to recognise
        return self.generic(s)

    def _as_copy(self, loop):
        nest = parallel_nest(loop)
        if nest is None:
            return None
        loops, body = nest
        if not isinstance(body, ir.Store) or body.buffer.scope not in SHARED:
            return None
        value = body.value
        if isinstance(value, ir.Cast):
            if value.dtype != body.buffer.dtype:
                return None  # an intermediate rounding (e.g. through float16) the copy would skip
            value = value.value
        if not isinstance(value, ir.Load) or value.buffer.scope != "global":
            return None
        extent = {lp.var: ir.int_value(lp.extent) for lp in loops}
        if None in extent.values():
            return None
        loop_vars = [lp.var for lp in loops]
        dst = match_indices(self.analyzer, body.indices, loop_vars)
        src = match_indices(self.analyzer, value.indices, loop_vars)
        if dst is None or src is None:
            return None
        order_dst = [id(v) for v, _ in dst if v is not None]
        if order_dst != [id(v) for v, _ in src if v is not None]:
            return None  # a transposing load: the copy pairs dimensions in order
        dst_region = []
        for (v, start), size in zip(dst, body.buffer.shape):
            n = extent[v] if v is not None else 1
            if not (isinstance(size, int)
                    and self.analyzer.prove(ir.compare("ge", start, 0))
                    and self.analyzer.prove(ir.compare("le", start + n, size))):
                return None  # the shared window must lie inside the tile
            dst_region.append((start, n))
        src_region = tuple((start, extent[v] if v is not None else 1) for v, start in src)
        return ir.Copy(ir.BufferRegion(value.buffer, src_region),
                       ir.BufferRegion(body.buffer, tuple(dst_region)), (), loc=loop.loc)


def recognise_parallel_copies(stmt):
    return _Recognise().visit(stmt)
