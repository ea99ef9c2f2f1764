"""Place every shared buffer in the block's dynamic shared-memory arena.

Expects: thread IR whose shared buffers are still logical tiles (indexed by logical
coordinates) with layouts in `ctx.layouts`. Guarantees: every shared access indexes a flat
buffer (one per allocation) by the physical offset its layout gives; `ctx.shared_plan` maps
each flat buffer to its byte offset; buffers whose lifetimes do not overlap share memory
(first fit, largest first; `tl.disable_shared_memory_reuse` turns sharing off). A use inside
a loop keeps a buffer live over the whole loop, except that pipeline stage buffers and staged
epilogue tiles (`fresh_buffers`) are live only around their own uses inside an outer loop
that holds them all (a persistent GEMM's tile loop): the epilogue tile takes the stages'
bytes; with `tl.enable_aggressive_shared_memory_merge` every shared buffer is treated so
(the reference's aggressive merge: the user promises no tile carries a value across
iterations). Roles run side by side: a buffer used inside a branch on the thread index (or a run
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
from .analysis.scopes import SHARED
from .analysis.shared_memory import Liveness, fresh_buffers, smem_limit

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


def plan_shared_memory(kernel: ir.Kernel, ctx) -> ir.Kernel:
    buffers = [b for b in kernel.allocs if b.scope in SHARED] + list(ctx.scratch_shared)
    fresh = fresh_buffers(ctx)
    if ctx.flag(PassConfigKey.TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE):
        # the user's promise, as the reference reads it: no shared tile carries a value from
        # one iteration of a loop to the next, so one used only inside a loop is live between
        # its first and last use in an iteration (a gather tile and the staging tile of a
        # later atomic add share bytes); insert_sync orders the reuse across iterations
        fresh = fresh | set(buffers)
    live = Liveness(fresh, kernel.thread_vars)
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
