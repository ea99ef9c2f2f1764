"""`T.atomic_add(G[region], S, use_tma=True)`: a shared tile added into global memory by the
TMA unit (a step of its own before `stage_epilogue` and `lower_copies`).

Also `T.store_cluster_sum(G[region], S)`: the first block of the cluster stores S with TMA
and waits for the writes, a cluster barrier, then the others add theirs (element-wise stores
and atomics in the same order where TMA does not apply; an error before sm_90, which has no
clusters to order the blocks).

Expects: tile IR after layout inference and pipelining, in which the only `AtomicTile`
nodes left are shared→global adds with use_tma=True and cluster sums (lower_elementwise.py
lowered the others), the shared tile's layout in `ctx.layouts`.

Rejects (located errors, as the reference does) a use_tma=True add between tiles of different
element types (trace time: an element type the TMA unit does not add) and one compiled for a
CUDA target without TMA (before sm_90).

Guarantees: on sm_90a (TMA not disabled by pass config), when the global buffer is static,
contiguous, of rank <= 5 with 16-byte rows and the same float type (float32, float16,
bfloat16, int32, uint32, uint64: the types the TMA unit adds) as the tile, the tile is 2-D (rows x columns, columns along the global innermost
dim), row-major or swizzled with TMA column blocks, and the rows fit one TMA box (<= 256):

    fence.proxy.async; barrier                    # every thread's writes of the tile
    if tid == 0: one cp.reduce.async.bulk.tensor .add per column block; commit;
                 wait until the tile has been read (it may be rewritten after the next barrier)
                 or, when the kernel also loads from G, until the sums are written (then a
                 proxy fence), so a thread that passes a later barrier reads them as it would
                 after element-wise atomics

which adds every element once, as the element-wise atomics would (the TMA unit's reductions
are atomic per element); rows and columns outside the tensor are skipped, so ragged edges
are exact. Otherwise the element-wise atomics of lower_elementwise.py, with a note saying why.
"""

from __future__ import annotations

from ..errors import located
from ..ir import nodes as ir
from ..ir.dtype import TMA_ADD_DTYPES
from ..ir.thread_range import InRoleGroups
from ..ir.visitor import Mutator
from .analysis.tile_loops import atomic_as_loop, store_as_loop
from .pass_config import PassConfigKey
from .analysis.tma_plan import rows_16_byte_aligned, tma_tile_stores

_TYPES = TMA_ADD_DTYPES


def tma_reduce(s: ir.AtomicTile, ctx, read_back: bool = False, op: str = "tl::tma_store_add"):
    """The TMA statements for `s`, or (None, reason). `read_back`: the kernel also loads from
    the destination, so the issuing thread waits until the sums are in memory (as the
    element-wise atomics are when it passes its next barrier). `op`: the TMA instruction
    (`tl::tma_store` for the first block of a cluster sum)."""
    src, dst = s.src, s.dst
    S, G = src.buffer, dst.buffer
    if not ctx.target.is_hopper or ctx.flag(PassConfigKey.TL_DISABLE_TMA_LOWER):
        return None, "TMA needs sm_90a (and tl.disable_tma_lower unset)"
    if G.computed_address:
        return None, f"{G.name} is at an address computed in the kernel (no tensor map)"
    if G.dtype is not S.dtype or G.dtype.name not in _TYPES:
        return None, f"TMA adds {'/'.join(_TYPES)} tiles into the same type"
    if G.strides is not None or not 1 <= len(G.shape) <= 5 or not rows_16_byte_aligned(G):
        return None, "the global tensor must be contiguous, rank <= 5, with 16-byte rows"
    s_ext = [ir.int_value(e) for e in src.extents]
    if len(S.shape) != 2 or s_ext != list(S.shape) or \
            any(ir.int_value(x) != 0 for x, _ in src.region):
        return None, "the shared tile must be a whole 2-D buffer"
    rows, cols = S.shape
    kept = [d for d, e in enumerate(dst.extents) if ir.int_value(e) != 1]  # tile dims in G
    if len(kept) != (rows > 1) + 1 or kept[-1] != len(G.shape) - 1:
        return None, "the tile's columns must run along the tensor's innermost dimension"
    lay = ctx.layouts.get(S)
    if lay is None:
        return None, "no layout for the shared tile"
    if getattr(lay, "swizzle_bytes", None):
        swizzle, blk = lay.swizzle_bytes, lay.column_block
    elif getattr(lay, "row_major", False) or getattr(lay, "name", "") == "row_major":
        swizzle, blk = 0, cols
    else:
        return None, f"the shared tile's layout ({getattr(lay, 'name', lay)}) is not one TMA reads"
    if not blk or cols % blk or rows > 256 or blk > 256 or (blk * S.dtype.bytes) % 16:
        return None, "the tile does not split into TMA boxes (<= 256 rows, 16-byte columns)"
    kind = "add" if op == "tl::tma_store_add" else "store"
    name = f"{G.name}_{kind}_desc{len(ctx.tma_descriptors)}"
    starts = [ir.as_expr(x) for x, _ in dst.region]
    return tma_tile_stores(ctx, op, name, G, S, kept[0], rows, cols, blk, swizzle, starts,
                           visible=read_back), None


def in_cluster_order(n: int, first: ir.Stmt, rest: ir.Stmt) -> ir.Stmt:
    """`first` in the first block of a cluster of n, then, once every block of the cluster has
    passed a cluster barrier (release/acquire: `first`'s writes are visible), `rest` in the
    others. A cluster of one runs `first` alone."""
    if n == 1:
        return first
    rank = ir.Call("call_extern", ("tl::cluster_ctarank",), ir.DType("int32"))
    return ir.Seq((ir.If(ir.compare("eq", rank, 0), first, None),
                   ir.extern_stmt("tl::cluster_arrive"), ir.extern_stmt("tl::cluster_wait"),
                   ir.If(ir.compare("ne", rank, 0), rest, None)))


def cluster_sum(s: ir.AtomicTile, ctx, read_back: bool):
    """`T.store_cluster_sum` by the TMA unit, or (None, reason): the first block of the
    cluster stores its tile and waits until the writes are done, a cluster barrier, then the
    others add theirs. The proxy fences carry the order across the barrier: the first
    block's TMA writes -> generic (before it arrives), generic -> the others' TMA reductions
    (after they wait)."""
    if s.cluster_sum == 1:
        return tma_reduce(s, ctx, read_back, op="tl::tma_store")
    first, reason = tma_reduce(s, ctx, True, op="tl::tma_store")
    if first is None:
        return None, reason
    rest, _ = tma_reduce(s, ctx, read_back)  # the same checks passed
    fence = ir.extern_stmt("tl::fence_proxy_async_global")
    return (in_cluster_order(s.cluster_sum, ir.Seq((*first, fence)),
                             ir.Seq((fence, *rest))),), None


def _check_tma_add(s: ir.AtomicTile, ctx):
    """What the reference rejects in a `use_tma=True` add rather than falling back: a target
    without TMA, tiles of different element types (an element type the TMA unit does not
    add: when traced)."""
    if s.use_tma and 0 < ctx.target.sm < 90:
        raise located(ValueError)(
            f"TMA atomic add requires a CUDA target with TMA support (SM90+), but got target "
            f"{ctx.target.arch}: drop use_tma=True for element-wise atomics", s.loc)
    if s.use_tma and s.src.buffer.dtype is not s.dst.buffer.dtype:
        raise located(TypeError)(
            f"TMA atomic add between buffer {s.src.buffer.name} and {s.dst.buffer.name} "
            f"requires matching dtypes, but got {s.src.buffer.dtype} and "
            f"{s.dst.buffer.dtype}", s.loc)


def lower_tma_atomics(kernel: ir.Kernel, ctx) -> ir.Kernel:
    from ..ir.visitor import collect

    loaded = {n.buffer for n in collect(kernel.body, lambda n: isinstance(n, ir.Load))}

    class Lower(InRoleGroups, Mutator):
        """(in a role's thread group, one thread of the role issues the TMA reduction)"""

        def visit_AtomicTile(self, s):
            if s.cluster_sum:
                return self.cluster_sum(s)
            _check_tma_add(s, ctx)
            stmts, reason = tma_reduce(s, ctx, read_back=s.dst.buffer in loaded)
            if stmts is None:
                ctx.note(f"T.atomic_add(..., use_tma=True) into {s.dst.buffer.name}: "
                         f"element-wise atomics ({reason})")
                return atomic_as_loop(s)
            ctx.note(f"T.atomic_add(..., use_tma=True) into {s.dst.buffer.name}: TMA reduction "
                     f"of {s.src.buffer.name}")
            return ir.Seq(stmts)

        def cluster_sum(self, s):
            if s.cluster_sum > 1 and ctx.target.sm < 90:
                raise located(ValueError)(
                    f"T.store_cluster_sum over a cluster of {s.cluster_sum} blocks needs thread "
                    f"block clusters (sm_90+), not {ctx.target.arch}: zero the output and add "
                    f"with T.atomic_add instead", s.loc)
            if not s.use_tma:
                stmts, reason = None, "use_tma=False"
            else:
                stmts, reason = cluster_sum(s, ctx, read_back=s.dst.buffer in loaded)
            if stmts is None:
                ctx.note(f"T.store_cluster_sum into {s.dst.buffer.name}: element-wise stores "
                         f"and atomics ({reason})")
                return in_cluster_order(s.cluster_sum, store_as_loop(s), atomic_as_loop(s))
            ctx.note(f"T.store_cluster_sum into {s.dst.buffer.name}: TMA store, then TMA "
                     f"reductions of {s.src.buffer.name} across a cluster of {s.cluster_sum}")
            return ir.Seq(stmts)

    lower = Lower()
    lower.ctx = ctx
    return ir.with_fields(kernel, body=lower.visit(kernel.body))

