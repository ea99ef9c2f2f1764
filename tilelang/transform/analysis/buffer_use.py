"""Which buffers a statement reads, writes or names: the dependence facts the schedulers
(pipeline, warp_specialize, pingpong, wgmma_wait, computed_operands) reorder statements by."""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.visitor import any_node, collect


def touched_buffers(node) -> set:
    """Every buffer a statement names (loads, stores, regions, reduction operands)."""
    return set(collect(node, lambda n: isinstance(n, ir.Buffer)))


def written_by(node):
    """The buffer one statement itself stores to, copies or reduces into (None for others;
    statements nested in it are not looked at)."""
    if isinstance(node, ir.Store):
        return node.buffer
    if isinstance(node, (ir.Copy, ir.TmaCopy, ir.Fill, ir.AtomicTile)):
        return node.dst.buffer
    if isinstance(node, ir.Gemm):
        return node.C.buffer
    if isinstance(node, (ir.Reduce, ir.CumSum)):
        return node.dst
    return None


def written_buffers(node) -> set:
    """Every buffer a statement stores to, copies or reduces into, or allocates."""
    return {b for n in collect(node, lambda n: written_by(n) is not None
                               or isinstance(n, ir.Allocate))
            for b in (n.buffer if isinstance(n, ir.Allocate) else written_by(n),)}


def buffers_read(node) -> set:
    """Every buffer a statement loads from or names in a region (a copy's source, a gemm's
    operands; a region written is named too)."""
    return {n.buffer for n in collect(node, lambda n: isinstance(n, ir.Load))} | {
        r.buffer for r in collect(node, lambda n: isinstance(n, ir.BufferRegion))}


def whole_buffer_user(node, buf) -> bool:
    """Reductions and scans take whole buffers, not a stage of a multi-buffered one."""
    return any_node(node, lambda n: isinstance(n, (ir.Reduce, ir.CumSum))
                        and buf in (n.src, n.dst))


def uses_buffer(node, buf) -> bool:
    """Whether `node` loads, stores, names a region of, or otherwise mentions `buf`."""
    return any_node(node, lambda n: (isinstance(n, (ir.Load, ir.Store)) and n.buffer is buf)
                        or (isinstance(n, ir.BufferRegion) and n.buffer is buf)
                        or (isinstance(n, ir.Buffer) and n is buf))
