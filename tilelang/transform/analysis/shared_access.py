"""Which shared memory a thread-level statement reads and writes, as the barrier pass
(insert_sync) and the TMA store wait deferral (defer_store_waits) both count it: loads and
stores of shared buffers, atomics, and header calls by the effects device_ops.py gives them.
"""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.visitor import children
from .device_ops import ATOMIC_UPDATES, Effect, has_effect
from .scopes import SHARED


class SharedAccesses:
    """Shared-memory effects of statements of one kernel; buffers overlap by the byte ranges
    plan_shared gave them (ctx.shared_plan), or by identity before it ran."""

    def __init__(self, ctx):
        self.ranges = {b: (off, off + b.numel() * b.dtype.bytes)
                       for b, off in ctx.shared_plan.items()}
        # statement -> its effects: the passes ask of every statement at every depth (and of
        # loop bodies once per pass over them), so a statement's effects are the union of
        # its nested statements' remembered ones
        self._stmt_effects: dict = {}

    def overlap(self, a, b) -> bool:
        """Whether two shared buffers share bytes (after plan_shared; the same buffer before)."""
        ra, rb = self.ranges.get(a), self.ranges.get(b)
        if ra is None or rb is None:
            return a is b
        return ra[0] < rb[1] and rb[0] < ra[1]

    def effects(self, node):
        """(reads, writes): shared buffers a statement (recursively) reads and writes."""
        reads, writes, _ = self.all_effects(node)
        return reads, writes

    def all_effects(self, node):
        """(reads, writes, async_writes), frozen sets. Async writes (the pipeliner's cp.async)
        must not start before earlier accesses of their memory are done, but are not
        recorded: the pipeliner's wait+barrier orders them with their readers."""
        known = self._stmt_effects.get(node)
        if known is not None:
            return known
        reads, writes, async_writes = set(), set(), set()
        nested = []
        for n in accesses(node, nested if isinstance(node, ir.Stmt) else None):
            if isinstance(n, ir.Call) and n.op in ATOMIC_UPDATES:
                # the element an atomic updates (its first argument) is written as well as read
                target = n.args[0]
                if isinstance(target, ir.Load) and target.buffer.scope in SHARED:
                    writes.add(target.buffer)
            if isinstance(n, ir.Load) and n.buffer.scope in SHARED:
                reads.add(n.buffer)
            elif isinstance(n, ir.Store) and n.buffer.scope in SHARED:
                writes.add(n.buffer)
            elif ir.is_extern_call(n):
                name = n.args[0]
                if name == "tl::tma_load" and dict(n.attrs).get("async"):
                    # T.tma_copy at block level: overwrites the tile asynchronously
                    dst = call_buffers(n)[2]
                    if dst is not None and dst.scope in SHARED:
                        async_writes.add(dst)
                    continue
                if has_effect(name, Effect.ORDERED):
                    continue
                if dict(n.attrs).get("async"):
                    if has_effect(name, Effect.WRITES_FIRST):
                        dst = call_buffers(n)[0]
                        if dst is not None and dst.scope in SHARED:
                            async_writes.add(dst)
                    continue
                bufs = call_buffers(n)
                shared = [b for b in bufs if b is not None and b.scope in SHARED]
                if not shared:
                    continue
                if has_effect(name, Effect.READS_SHARED):
                    reads.update(shared)
                elif has_effect(name, Effect.WRITES_FIRST):  # (dst, src...) pointer arguments
                    dst, srcs = bufs[0], bufs[1:]
                    if dst is not None and dst.scope in SHARED:
                        writes.add(dst)
                    reads.update(b for b in srcs if b is not None and b.scope in SHARED)
                else:
                    reads.update(shared)
                    writes.update(shared)
        # loads nested in address_of() of a call are pointers, not reads
        for stmt in nested:
            r, w, a = self.all_effects(stmt)
            reads |= r
            writes |= w
            async_writes |= a
        got = frozenset(reads), frozenset(writes), frozenset(async_writes)
        if isinstance(node, ir.Stmt):
            self._stmt_effects[node] = got
        return got


def accesses(root, nested_stmts: list = None):
    """Loads, stores and calls under `root`, not looking inside address_of()/access_ptr():
    a pointer passed to a call is not a read (the call's own rule says what it touches).
    With `nested_stmts`, the statements nested in `root` are appended to it instead of
    walked."""
    out, stack = [], [root]
    while stack:
        node = stack.pop()
        if isinstance(node, (ir.Load, ir.Store, ir.Call)):
            out.append(node)
            if isinstance(node, ir.Call) and node.op in ("address_of", "access_ptr"):
                continue
        elif nested_stmts is not None and node is not root and isinstance(node, ir.Stmt):
            nested_stmts.append(node)
            continue
        stack.extend(children(node))
    return out


def call_buffers(call: ir.Call):
    """The buffer each pointer argument of a call points into (None for other arguments)."""
    out = []
    for a in call.args[1:]:
        if isinstance(a, ir.Buffer):
            out.append(a)
        elif isinstance(a, ir.Call) and a.op in ("address_of", "access_ptr"):
            inner = a.args[0]
            out.append(inner.buffer if isinstance(inner, ir.Load) else inner)
        else:
            out.append(None)
    return out
