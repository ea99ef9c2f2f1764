"""How much shared memory a kernel takes and when each shared buffer is live: the target's
limit, the bytes a tile takes under its layout, and the live ranges plan_shared packs the
arena by (wgmma_wait asks them too; stage_epilogue and warp_specialize check the limit); the
bank wavefronts of a warp's access (layout_inference pads tiles by them)."""

from __future__ import annotations

import numpy as np

from ...ir import nodes as ir
from ...ir.visitor import children, collect
from ...layout.index import distinct
from .scopes import SHARED

SMEM_LIMIT = {80: 166912, 86: 101376, 87: 166912, 89: 101376, 90: 232448, 100: 232448,
              120: 101376}


def smem_limit(sm: int) -> int:
    best = 49152
    for k, v in SMEM_LIMIT.items():
        if sm >= k:
            best = v
    return best


def warp_wavefronts(offsets, elem_bytes: int) -> int:
    """Shared-memory wavefronts of one warp's access of elements of `elem_bytes` (4 or less)
    at element `offsets` (one per lane): the most distinct 4-byte words any one of the 32
    banks serves; lanes reading one word share it."""
    words = distinct(np.asarray(offsets, dtype=np.int64) * elem_bytes // 4)
    return int(np.bincount(words % 32, minlength=32).max()) if words.size else 0


def _producer_split(node: ir.If) -> bool:
    """The warp specializer's producer / consumer branches (transform/warp_specialize/): it
    orders their buffers itself (the stage buffers are shared by design; the epilogue may take
    the bytes of the ring's barriers once both loops are done)."""
    return any(isinstance(b, ir.Attr) and b.key == "thread_group" and b.value[0] == "producer"
               for b in (node.then_body, node.else_body))


class Liveness:
    """First/last position of each shared buffer in a linear walk of the statements. A use
    inside a loop (or a partitioned T.Parallel region) makes the buffer live over the whole
    loop (its value may be carried to the next iteration), except for a *fresh* buffer
    (written before it is read wherever it is used: pipeline stages, staged epilogues) in a
    loop that holds all of its uses: each iteration defines it anew, so it is live only
    between its own first and last use there."""

    def __init__(self, fresh=(), thread_vars=()):
        self.pos = 0
        self.first: dict = {}
        self.last: dict = {}
        self.fresh = fresh
        self.thread_vars = set(thread_vars)
        self.stack: list = []  # open loops: (start position, buffers used inside)
        self.loops: list = []  # closed loops: (start, end, buffers used inside)
        self.concurrent: list = []  # roles running side by side: (start, end, buffers)

    def touch(self, buf):
        buf = buf.view_of or buf  # a view's uses keep its tile live
        self.first.setdefault(buf, self.pos)
        self.last[buf] = self.pos
        for _, used in self.stack:
            used.add(buf)

    def _side_by_side(self, node) -> bool:
        """Whether the parts of `node` may run at the same time in different threads: a
        branch on the thread index, or a run of T.ws roles."""
        if isinstance(node, ir.Seq):
            return sum(isinstance(s, ir.Attr) and s.key == "warp_role" for s in node.stmts) > 1
        if not isinstance(node, ir.If) or _producer_split(node):
            return False
        return bool(self.thread_vars) and any(
            v in self.thread_vars for v in collect(node.cond, lambda n: isinstance(n, ir.Var)))

    def walk(self, node):
        if self._side_by_side(node):
            start = self.pos
            self.stack.append((start, set()))
            self._walk(node)
            _, used = self.stack.pop()
            self.concurrent.append((start, self.pos, used))
            return
        self._walk(node)

    def _walk(self, node):
        # a loop, or one T.Parallel nest split into loops (vectorize.py's held-back stores):
        # whatever it touches is live over all of it, so no buffer it writes takes the bytes
        # of one that another thread may still be reading in it
        if isinstance(node, (ir.For, ir.While)) or \
                (isinstance(node, ir.Attr) and node.key == "partitioned"):
            start = self.pos
            self.stack.append((start, set()))
            for c in children(node):
                self.walk(c)
            self.pos += 1
            _, used = self.stack.pop()
            self.loops.append((start, self.pos, used))
            self.pos += 1  # the next statement starts after the loop's end
            return
        if isinstance(node, (ir.Load, ir.Store)) and node.buffer.scope in SHARED:
            self.touch(node.buffer)
        elif isinstance(node, ir.Buffer) and node.scope in SHARED:
            self.touch(node)
        if isinstance(node, ir.Stmt):
            self.pos += 1
        for c in children(node):
            self.walk(c)

    def finish(self):
        """Extend live ranges over the loops that may carry a buffer between iterations."""
        raw_first, raw_last = dict(self.first), dict(self.last)
        for start, end, used in self.concurrent:
            for b in used:
                self.first[b] = min(self.first[b], start)
                self.last[b] = max(self.last[b], end)
        for start, end, used in self.loops:
            for b in used:
                if b in self.fresh and start <= raw_first[b] and raw_last[b] <= end:
                    continue
                self.first[b] = min(self.first[b], start)
                self.last[b] = max(self.last[b], end)


def tile_bytes(ctx, buf) -> int:
    """Bytes `buf` takes in the arena (its layout's physical size; padded layouts take more)."""
    lay = ctx.layouts.get(buf)
    return (lay.physical_size if lay is not None else buf.numel()) * buf.dtype.bytes


def arena_bytes(ctx, allocs) -> int:
    """Shared memory the kernel's allocations and the passes' scratch tiles take, without
    reuse or alignment."""
    return sum(tile_bytes(ctx, b) for b in allocs if b.scope in SHARED) + \
        sum(tile_bytes(ctx, b) for b in ctx.scratch_shared)


def fresh_buffers(ctx) -> set:
    """Shared buffers written before they are read in every region that uses them: the
    multi-buffered stages of a pipeline (its copies fill a stage before any read of it, and
    the pipeliner keeps them out of the rest of the kernel) and staged epilogue tiles."""
    return set(ctx.replaced_shared.values()) | set(ctx.fresh_shared)
