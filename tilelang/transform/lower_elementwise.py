"""Turn element-wise tile operators into T.Parallel loops.

Expects: tile IR with legalised `Copy`/`Fill`/`AtomicTile` (paired extents).
Guarantees: every `Fill`, every `AtomicTile` (but a shared→global add with use_tma=True and a
cluster sum, left for tma_reduce), and every `Copy` except global→shared
(kept for the pipeliner and the async-copy lowering) is replaced by a parallel loop nest over
the operator's non-unit extents whose body is the per-element statement. The loop carries the
annotation ("from_tile_op", name) so later passes can tell it from a user loop.
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import Mutator
from .analysis.scopes import THREAD_PRIVATE, is_global_to_shared
from .analysis.tile_loops import (atomic_as_loop, copy_as_loop, non_unit_extents, parallel_nest,
                                  region_index, tma_reduce_candidate)


class _Lower(Mutator):
    def visit_Copy(self, s: ir.Copy):
        if is_global_to_shared(s):
            return s
        return copy_as_loop(s)

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
