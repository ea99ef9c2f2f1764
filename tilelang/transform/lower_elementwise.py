"""Turn element-wise tile operators into T.Parallel loops.

Expects: tile IR with legalised `Copy`/`Fill`/`AtomicTile` (paired extents).
Guarantees: every `Fill`, every `AtomicTile` (but a shared→global add with use_tma=True and a
cluster sum, left for tma_reduce), and every `Copy` except global→shared
(kept for the pipeliner and the async-copy lowering) is replaced by a parallel loop nest over
the operator's non-unit extents whose body is the per-element statement. The loop carries the
annotation ("from_tile_op", name) so later passes can tell it from a user loop; the nest of a
shared -> global copy also carries (STORE_COPY, (the Copy, its innermost store)): lower_copies
may perform it as a TMA store once the tile's layout is known, if the nest is still that copy.
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import Mutator
from .analysis.scopes import SHARED, THREAD_PRIVATE, is_global_to_shared
from .analysis.tile_loops import (STORE_COPY, atomic_as_loop, copy_as_loop, non_unit_extents,
                                  parallel_nest, region_index, tma_reduce_candidate)


def _innermost(s):
    while isinstance(s, ir.For):
        s = s.body
    return s


class _Lower(Mutator):
    def visit_Copy(self, s: ir.Copy):
        if is_global_to_shared(s):
            return s
        loop = copy_as_loop(s)
        if s.src.buffer.scope in SHARED and s.dst.buffer.scope == "global" and \
                isinstance(loop, ir.For):
            loop = ir.with_fields(loop, annotations=loop.annotations + (
                (STORE_COPY, (s, _innermost(loop))),))
        return loop

    def visit_Fill(self, s: ir.Fill):
        extents = non_unit_extents(s.dst)

        def body(vs):
            return ir.Store(s.dst.buffer, region_index(s.dst, vs), s.value, loc=s.loc)

        return parallel_nest(extents, body, s.loc, "fill",
                             s.dst.buffer.scope in THREAD_PRIVATE)

    def visit_AtomicTile(self, s: ir.AtomicTile):
        if tma_reduce_candidate(s) or s.cluster_sum:
            return s  # tma_reduce decides once the shared tile's layout is known
        return atomic_as_loop(s)


def lower_elementwise_tile_ops(stmt):
    return _Lower().visit(stmt)
