"""Fold the zeroing of a wgmma accumulator into the gemm that overwrites it.

Expects: tile IR after the schedule passes (warp_specialize, pipeline, pingpong, wgmma_waits),
fills lowered to parallel loops tagged ("from_tile_op", "fill"), gemms not lowered yet, and
each gemm's backend in `ctx.gemm_info`.

Guarantees: where a statement list holds `T.clear(C)` (a fill of the whole fragment C with
zero) and, later in the same list with nothing between them touching C, a wgmma gemm that
accumulates into the whole of C, the fill is dropped and the gemm gets `clear_accum=True`. Its
first instruction per row block then runs with scale-d = 0, and because the clear is known at
compile time the template redefines C's registers instead of reading them (`FreshC` in
tl/gemm_sm90.cuh). ptxas turns `C = 0; wgmma(C)` into a zero-initialised wgmma by itself in
simple loops but not in every one (FlashAttention in a persistent tile loop kept 64 register
moves per iteration and the wgmma read them); folded, nothing is left to zero. Runs after the
schedule passes so that the statement indices of `T.Pipelined(order=, stage=, group=)` still
name the user's statements. mma.sync gemms are left alone (their clear is the same zeroing).
Pass config `tl.disable_clear_fold` turns it off.
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import Mutator
from .analysis.buffer_use import touched_buffers
from .pass_config import PassConfigKey


def _zero_value(e) -> bool:
    """A stored 0 (int or float literal, through casts)."""
    while isinstance(e, ir.Cast):
        e = e.value
    return isinstance(e, ir.Const) and not e.dtype.is_bool and e.value == 0


def cleared_fragment(stmt):
    """The fragment a `T.clear`/`T.fill(_, 0)` loop nest zeroes whole, else None."""
    if not (isinstance(stmt, ir.For) and stmt.annotation("from_tile_op") == "fill"):
        return None
    loops, body = [], stmt
    while isinstance(body, ir.For):
        if ir.int_value(body.start) != 0 or body.step != 1:
            return None
        loops.append(body)
        body = body.body
    if not (isinstance(body, ir.Store) and _zero_value(body.value)):
        return None
    buf = body.buffer
    if buf.scope != "local.fragment" or len(loops) != len(buf.shape):
        return None
    if any(idx is not loop.var for idx, loop in zip(body.indices, loops)):
        return None
    if [ir.int_value(lp.extent) for lp in loops] != list(buf.shape):
        return None
    return buf


def _accumulates_whole(g: ir.Gemm, buf) -> bool:
    if g.C.buffer is not buf or not (g.clear_accum is False or _zero_value(g.clear_accum)):
        return False
    return all(ir.int_value(start) == 0 and ir.int_value(extent) == size
               for (start, extent), size in zip(g.C.region, buf.shape))


class _Fold(Mutator):
    def __init__(self, is_wgmma, registers):
        self.is_wgmma = is_wgmma
        self.registers = registers  # fragment -> its register array, where one exists yet
        self.folded = 0

    def _gemm_overwriting(self, stmts, i, buf):
        """Index of the wgmma gemm after stmts[i] that accumulates into all of `buf` with
        nothing touching `buf` (or its register array) in between, else None."""
        names = {buf, self.registers.get(buf)} - {None}
        for j in range(i + 1, len(stmts)):
            st = stmts[j]
            if isinstance(st, ir.Gemm) and self.is_wgmma(st) and _accumulates_whole(st, buf):
                return j
            if names & touched_buffers(st):
                return None
        return None

    def visit_Seq(self, s: ir.Seq):
        stmts = [self.visit(c) for c in s.stmts]
        out = []
        for i, st in enumerate(stmts):
            buf = cleared_fragment(st)
            j = None if buf is None else self._gemm_overwriting(stmts, i, buf)
            if j is None:
                out.append(st)
                continue
            stmts[j] = ir.with_fields(stmts[j], clear_accum=True)
            self.folded += 1
        if len(out) == len(s.stmts) and all(a is b for a, b in zip(out, s.stmts)):
            return s
        return ir.with_fields(s, stmts=tuple(out))


def fold_accumulator_clears(kernel, ctx):
    if not ctx.target.is_hopper or ctx.flag(PassConfigKey.TL_DISABLE_CLEAR_FOLD):
        return kernel
    fold = _Fold(ctx.is_wgmma, ctx.registers)
    body = fold.visit(kernel.body)
    if fold.folded:
        ctx.note(f"{fold.folded} accumulator clear(s) folded into the wgmma that follows")
    return kernel if body is kernel.body else ir.with_fields(kernel, body=body)
