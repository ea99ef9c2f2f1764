"""Which buffers a statement reads, writes or names: the dependence facts the schedulers
(pipeline, warp_specialize, pingpong, wgmma_wait, computed_operands) reorder statements by."""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.visitor import Visitor, collect


def touched_buffers(node) -> set:
    """Every buffer a statement names (loads, stores, regions, reduction operands)."""
    return set(collect(node, lambda n: isinstance(n, ir.Buffer)))


def written_buffers(node) -> set:
    """Every buffer a statement stores to, copies or reduces into, or allocates."""
    out = set()

    class V(Visitor):
        def visit_Store(self, s):
            out.add(s.buffer)
            self.generic(s)

        def visit_Copy(self, s):
            out.add(s.dst.buffer)

        def visit_TmaCopy(self, s):
            out.add(s.dst.buffer)

        def visit_Fill(self, s):
            out.add(s.dst.buffer)

        def visit_Gemm(self, s):
            out.add(s.C.buffer)

        def visit_Reduce(self, s):
            out.add(s.dst)

        def visit_CumSum(self, s):
            out.add(s.dst)

        def visit_AtomicTile(self, s):
            out.add(s.dst.buffer)

        def visit_Allocate(self, s):
            out.add(s.buffer)
            self.generic(s)

    V().visit(node)
    return out


def buffers_read(node) -> set:
    """Every buffer a statement loads from or names in a region (a copy's source, a gemm's
    operands; a region written is named too)."""
    return {n.buffer for n in collect(node, lambda n: isinstance(n, ir.Load))} | {
        r.buffer for r in collect(node, lambda n: isinstance(n, ir.BufferRegion))}


def whole_buffer_user(node, buf) -> bool:
    """Reductions and scans take whole buffers, not a stage of a multi-buffered one."""
    return bool(collect(node, lambda n: isinstance(n, (ir.Reduce, ir.CumSum))
                        and buf in (n.src, n.dst)))


def uses_buffer(node, buf) -> bool:
    """Whether `node` loads, stores, names a region of, or otherwise mentions `buf`."""
    return bool(collect(node, lambda n: (isinstance(n, (ir.Load, ir.Store)) and n.buffer is buf)
                        or (isinstance(n, ir.BufferRegion) and n.buffer is buf)
                        or (isinstance(n, ir.Buffer) and n is buf)))
