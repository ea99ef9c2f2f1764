"""wgmma operands that the consumers compute: overlap their computation with the gemm.

Expects: the consumer statements of a warp-specialised pipelined loop (tile IR after layout
inference, the TMA copies taken out; warp_specialize/__init__.py builds the loop).

A tile the consumers write whole in every iteration and a wgmma gemm then reads (the
dequantised weights of a weight-only-quantised GEMM: packed codes come in by TMA, a T.Parallel
nest expands them into shared memory, or into the registers of a gemm's A operand)
serialises the plain loop: the expansion of iteration
k+1 overwrites the tile the gemm of iteration k still reads, so every gemm must finish before
the next expansion starts. With two copies of the tile, alternating by iteration parity, the
expansion of k+1 runs while the gemm of k does.

warp_specialize/__init__.py applies it to loops of at least two iterations with at least three
stages (with two, the next load waits for the publication of the tile and is exposed).

Guarantees: `computed_operands` names the tiles this applies to (written by exactly one
statement, a T.Parallel nest storing every element that reads nothing computed from a gemm of
the loop, before
anything in the body reads them; read as an operand of a synchronous wgmma gemm (in shared
memory, or in registers as its A operand); used nowhere
outside the loop; a second copy fits in shared memory).
`publish_then_issue` rewrites the body for the unrolled loop: those gemms are issued without
waiting (wg_wait=-1), and before the first of them come, for tiles in shared memory, a proxy
fence and a barrier over the consumers, then `release` (the caller's hand-back of the
previous iteration's ring stage). wgmma_wait.py then waits for the previous gemm just before
that barrier (after it the other warpgroups may overwrite the tiles that gemm reads) or, for
tiles in registers, before the release. `swap_buffers` retargets the body of odd iterations
to the second copies.
"""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.visitor import Mutator
from ..analysis.buffer_use import touched_buffers, written_buffers
from ..analysis.scopes import SHARED


def computed_operands(stmts, is_wgmma, outside) -> list:
    """The shared tiles of the loop body `stmts` worth a second copy (see the module doc);
    `is_wgmma(gemm)` says which gemms lower to wgmma, `outside` is the rest of the kernel."""
    if any(isinstance(s, tuple) for s in stmts):
        return []  # a let of the body would be declared twice in the unrolled loop
    # what the gemms of an iteration compute and everything derived from it
    from_gemms = {g.C.buffer for g in stmts if isinstance(g, ir.Gemm)}
    for s in stmts:
        if touched_buffers(s) & from_gemms:
            from_gemms |= written_buffers(s)
    out = []
    for pos, g in enumerate(stmts):
        if not (isinstance(g, ir.Gemm) and is_wgmma(g) and g.wg_wait == 0):
            continue
        for b in (g.A.buffer, g.B.buffer):
            held = b.scope in SHARED or (b is g.A.buffer and b.scope == "local.fragment")
            if not held or b in out:
                continue
            writers = [i for i, s in enumerate(stmts) if b in written_buffers(s)]
            if len(writers) != 1 or writers[0] > pos or \
                    not overwrites_whole(stmts[writers[0]], b):
                continue
            if any(b in touched_buffers(s) for s in stmts[:writers[0]]):
                continue  # read before it is written: a value carried between iterations
            if touched_buffers(stmts[writers[0]]) & (from_gemms - {b}):
                continue  # computed from a gemm of the same iteration (attention's P): the
                # gemm before it waits for everything, so nothing would overlap
            if any(b in touched_buffers(o) for o in outside if not isinstance(o, tuple)):
                continue
            out.append(b)
    return out


def overwrites_whole(stmt, buf) -> bool:
    """Whether `stmt` is a T.Parallel nest over `buf`'s shape that stores buf[i, j, ...]
    unconditionally for every iteration (i, j, ...)."""
    loop_vars, s = [], stmt
    while isinstance(s, ir.For) and s.kind == "parallel" and s.step == 1 and \
            ir.int_value(s.start) == 0:
        if ir.int_value(s.extent) is None:
            return False
        loop_vars.append((s.var, ir.int_value(s.extent)))
        s = s.body
    if not loop_vars or tuple(e for _, e in loop_vars) != tuple(buf.shape):
        return False
    while isinstance(s, ir.LetStmt):
        s = s.body
    for st in (s.stmts if isinstance(s, ir.Seq) else (s,)):
        if isinstance(st, ir.Store) and st.buffer is buf and len(st.indices) == len(loop_vars) \
                and all(i is v for i, (v, _) in zip(st.indices, loop_vars)):
            return True
    return False


def publish_then_issue(stmts, computed, release) -> list:
    """The body with its gemms of computed tiles asynchronous, a fenced barrier (for tiles in
    shared memory; registers need none) and `release` before the first of them."""
    out, published = [], False
    shared = any(b.scope in SHARED for b in computed)
    for s in stmts:
        reads_computed = isinstance(s, ir.Gemm) and \
            {s.A.buffer, s.B.buffer} & set(computed)
        if reads_computed:
            if not published:
                if shared:
                    out += [ir.extern_stmt("tl::fence_proxy_async"),
                            ir.extern_stmt("__syncthreads")]
                out.append(release)
                published = True
            s = ir.with_fields(s, wg_wait=-1)
        out.append(s)
    return out


class _Swap(Mutator):
    def __init__(self, mapping):
        self.mapping = mapping

    def visit_Buffer(self, b):
        return self.mapping.get(b, b)


def swap_buffers(node, mapping: dict):
    """`node` with every use of a buffer in `mapping` replaced by its value."""
    return _Swap(mapping).visit(node)
