"""Place every shared buffer in the block's dynamic shared-memory arena.

Expects: thread IR whose shared buffers are still logical tiles (indexed by logical
coordinates) with layouts in `ctx.layouts`. Guarantees: every shared access indexes a flat
buffer (one per allocation) by the physical offset its layout gives; `ctx.shared_plan` maps
each flat buffer to its byte offset; buffers whose lifetimes do not overlap share memory
(first fit, largest first; `tl.disable_shared_memory_reuse` turns sharing off). A use inside
a loop keeps a buffer live over the whole loop, except that pipeline stage buffers and staged
epilogue tiles (`fresh_buffers`) are live only around their own uses inside an outer loop
that holds them all (a persistent GEMM's tile loop): the epilogue tile takes the stages'
bytes. Roles run side by side: a buffer used inside a branch on the thread index (or a run
of `T.ws` roles) is live over the whole branch, so no role takes bytes another role may be
using at the same time (the warp specializer's producer / consumer split excepted: it
orders its buffers itself). Ordering the reuses is insert_sync's job (it sees the
overlapping byte ranges); swizzled tiles are 1024-byte aligned, others 128-byte; a view of
a tile (`T.reshape`, `T.view`) is a flat buffer at the tile's offset, and its uses keep the
tile live; `ctx.smem_bytes` is the arena size. Exceeding the target's limit is a located
error.
"""

from __future__ import annotations

from ..errors import located
from ..ir import nodes as ir
from ..ir.visitor import Mutator
from .pass_config import PassConfigKey

SHARED = ("shared", "shared.dyn")
SMEM_LIMIT = {80: 166912, 86: 101376, 87: 166912, 89: 101376, 90: 232448, 100: 232448,
              120: 101376}


def smem_limit(sm: int) -> int:
    best = 49152
    for k, v in SMEM_LIMIT.items():
        if sm >= k:
            best = v
    return best


def _producer_split(node: ir.If) -> bool:
    """The warp specializer's producer / consumer branches (transform/warp_specialize.py): it
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
        from ..ir.visitor import collect

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
        from ..ir.visitor import children

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


class _Flatten(Mutator):
    def __init__(self, ctx, flat):
        self.ctx = ctx
        self.flat = flat

    def _index(self, buf, indices):
        layout = self.ctx.layouts[buf]
        return (ir.as_expr(layout.forward(*[self.visit(i) for i in indices])),)

    def visit_Load(self, e):
        fb = self.flat.get(e.buffer)
        if fb is None:
            return self.generic(e)
        return ir.Load(fb, self._index(e.buffer, e.indices), e.dtype)

    def visit_Store(self, s):
        fb = self.flat.get(s.buffer)
        if fb is None:
            return self.generic(s)
        return ir.Store(fb, self._index(s.buffer, s.indices), self.visit(s.value), loc=s.loc)

    def visit_Buffer(self, b):
        return self.flat.get(b, b)


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
    return set(getattr(ctx, "replaced_shared", {}).values()) | \
        set(getattr(ctx, "fresh_shared", ()))


def plan_shared_memory(kernel: ir.Kernel, ctx) -> ir.Kernel:
    buffers = [b for b in kernel.allocs if b.scope in SHARED] + list(ctx.scratch_shared)
    live = Liveness(fresh_buffers(ctx), kernel.thread_vars)
    live.walk(kernel.body)
    live.finish()
    for b in ctx.pinned_shared:  # peers may signal them until the kernel's last barrier
        if b in live.first:
            live.first[b], live.last[b] = 0, live.pos
    reuse = not ctx.flag(PassConfigKey.TL_DISABLE_SHARED_MEMORY_REUSE)
    used = [b for b in buffers if b in live.first]
    flat, sizes = {}, {}
    for b in used:
        layout = ctx.layouts[b]
        n = layout.physical_size
        fb = ir.Buffer(b.name, (n,), b.dtype, "shared.dyn", loc=b.loc)
        flat[b] = fb
        sizes[b] = n * b.dtype.bytes
    placed = []  # (start, end, first, last)
    offsets = {}
    for b in sorted(used, key=lambda x: -sizes[x]):
        align = 1024 if getattr(ctx.layouts[b], "swizzle_bytes", None) else 128
        lo, hi = live.first[b], live.last[b]
        off = 0
        while True:
            off = -(-off // align) * align
            clash = [p for p in placed if p[0] < off + sizes[b] and off < p[1]
                     and (not reuse or not (p[3] < lo or hi < p[2]))]
            if not clash:
                break
            off = max(p[1] for p in clash)
        placed.append((off, off + sizes[b], lo, hi))
        offsets[flat[b]] = off
    total = max((p[1] for p in placed), default=0)
    limit = smem_limit(ctx.target.sm)
    if total > limit:
        detail = ", ".join(f"{b.name} {list(b.shape)} {b.dtype} = {sizes[b]} B" for b in used)
        raise located(ValueError)(
            f"kernel needs {total} bytes of shared memory but {ctx.target.arch} allows {limit} "
            f"per block ({detail}); use smaller tiles or fewer pipeline stages",
            kernel.loc)
    # views (T.reshape / T.view of a shared tile) index their own flat buffer at the tile's
    # offset (their layouts are the tile's composed, or their own in the tile's bytes)
    for k, v in kernel.attrs:
        if k == "local_view" and v.scope in SHARED and v.view_of in flat:
            fv = ir.Buffer(v.name, (ctx.layouts[v].physical_size,), v.dtype, "shared.dyn",
                           loc=v.loc)
            flat[v] = fv
            offsets[fv] = offsets[flat[v.view_of]]
    ctx.shared_plan = offsets
    ctx.smem_bytes = total
    body = _Flatten(ctx, flat).visit(kernel.body)
    return ir.with_fields(kernel, body=body, allocs=tuple(b for b in kernel.allocs
                                                          if b.scope not in SHARED))
