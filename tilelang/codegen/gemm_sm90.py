"""`T.gemm` on wgmma (sm_90a): warpgroup partition, layouts, and the template call.

Chosen for a gemm when the target is sm_90a, the operands are float16/bfloat16 (one type) or
8-bit floats (float8_e4m3 / float8_e5m2, any mix) accumulating into float32, the block is whole
warpgroups, the tile splits into m64 x N (N <= 256) x 32-byte-K instructions and a shared
operand's T.annotate_layout, if any, is the swizzle wgmma reads (make_swizzled_layout); otherwise
the mma.sync backend (gemm_sm80) handles it. 8-bit wgmma has no transpose, so fp8 gemms qualify
only with both operands K-major in shared memory (A not transposed, B transposed: N x K) or A
in registers; other fp8 layouts stay on mma.sync with a note in the verbose log. The Fragments
built here and the register conventions of tl/gemm_sm90.cuh describe the same maps.
"""

from __future__ import annotations

from ..errors import located
from ..ir import nodes as ir
from ..layout import Fragment
from .. import layout as L
from . import gemm_sm80
from ..arith.analyzer import Analyzer

WGMMA_TYPES = {"float16", "bfloat16"}
FP8_TYPES = {"float8_e4m3", "float8_e5m2"}


def k_step(dtype) -> int:
    """K elements of one wgmma: 32 bytes of a K-major row (16 f16/bf16, 32 fp8)."""
    return 256 // dtype.bits


def _operand_types_ok(g: ir.Gemm, ctx) -> bool:
    a, b = g.A.buffer.dtype.name, g.B.buffer.dtype.name
    if a in WGMMA_TYPES:
        return b == a
    if a in FP8_TYPES and b in FP8_TYPES:
        if g.trans_A or not g.trans_B:
            _note_once(ctx, f"T.gemm {g.A.buffer.name} x {g.B.buffer.name}: fp8 wgmma needs "
                       "K-major operands (transpose_A=False, transpose_B=True); using mma.sync")
            return False
        return True
    return False


def _note_once(ctx, text):
    if text not in ctx.notes:
        ctx.note(text)


def partition(g: ir.Gemm, M, N, num_warps, ctx):
    """(WGM, WGN) warpgroups along M and N, or None when wgmma does not apply."""
    if num_warps % 4:
        return None
    nwg = num_warps // 4
    options, mid_atom = [], []
    for wgm in range(1, nwg + 1):
        if nwg % wgm:
            continue
        wgn = nwg // wgm
        if M % (64 * wgm) or N % wgn:
            continue
        wn = N // wgn
        if wn % 8 or wn > 256:
            continue
        if not _slice_fits_atoms(g, wn):
            mid_atom.append(wn)
            continue
        options.append((wgm, wgn))
    if not options:
        if mid_atom:
            b = g.B.buffer
            atom = L.swizzle_mode(b.shape, b.dtype.bits) * 8 // b.dtype.bits
            _note_once(ctx, f"T.gemm {g.A.buffer.name} x {b.name}: wgmma would split the "
                       f"{N} columns of {b.name} into slices of {mid_atom[0]}, which cross "
                       f"its {atom}-column swizzle atoms partway; using mma.sync (a tile of "
                       f"more rows, or columns in whole atoms per warpgroup, keeps wgmma)")
        return None
    if g.policy == "FullCol":
        return max(options, key=lambda o: (o[1], -o[0]))
    return max(options, key=lambda o: (o[0], -o[1]))  # full N per instruction first


def _slice_fits_atoms(g: ir.Gemm, wn: int) -> bool:
    """Whether the warpgroups' N slices of `wn` columns of an N-contiguous B (K x N in shared
    memory) are ones a wgmma descriptor can address: whole swizzle atoms, or pieces of one
    atom that never cross into the next (32 columns of a 64-column 128-byte atom). A slice
    that ends or starts mid-atom after whole ones is not: 80 columns of float16 have
    32-byte atoms of 16 columns, and slices of 40 came out wrong from column 32 on. A
    K-major B (N x K) is sliced by rows, which any multiple of 8 allows."""
    b = g.B.buffer
    if g.trans_B or b.scope not in ("shared", "shared.dyn"):
        return True
    mode = L.swizzle_mode(b.shape, b.dtype.bits)
    if mode is None:
        return True
    atom = mode * 8 // b.dtype.bits  # columns
    return wn % atom == 0 or atom % wn == 0


def hardware_obstacle(g: ir.Gemm, M, num_warps, ctx):
    """Why no wgmma can compute gemm `g` at all (the conditions of the instruction, not of this
    backend's choices, which may still fall back to mma.sync), or None."""
    if not ctx.target.is_hopper:
        return f"the target is {ctx.target.arch}, wgmma needs sm_90a"
    if ctx.wgmma_disabled:
        return "TL_DISABLE_WGMMA is set"
    threads = ctx.group[0] if ctx.group is not None else 32 * num_warps
    if threads % 128:
        return f"{threads} threads are not whole warpgroups of 128"
    if M % 64:
        return f"M={M} is not a multiple of the 64 rows of a warpgroup's wgmma"
    if g.B.buffer.scope not in ("shared", "shared.dyn"):
        return f"B ({g.B.buffer.name}) is in {g.B.buffer.scope}; wgmma reads B from shared memory"
    return None


def eligible(g: ir.Gemm, M, N, num_warps, ctx):
    if not ctx.target.is_hopper or ctx.wgmma_disabled:
        return None
    if ctx.group is not None and ctx.group[0] % 128:
        return None  # a role of threads that are not whole warpgroups: mma.sync
    a, b, c = g.A.buffer, g.B.buffer, g.C.buffer
    if c.dtype.name != "float32" or not _operand_types_ok(g, ctx):
        return None
    if b.scope not in ("shared", "shared.dyn"):
        return None
    K = g.A.extents[-1] if not g.trans_A else g.A.extents[-2]
    if K % k_step(a.dtype):
        return None
    for region, buf in ((g.A, a), (g.B, b)):
        if buf.scope == "local.fragment":
            continue
        if L.swizzle_mode(buf.shape, buf.dtype.bits) is None:
            return None
        for k, v in ctx.kernel.attrs:
            # a user layout other than the one wgmma reads (make_swizzled_layout gives that
            # one) keeps the general path
            if k == "layout" and v[0] is buf and \
                    not L.layout_equal(v[1], shared_operand_layout(buf, ctx)):
                return None
        if not _starts_addressable(region, buf, not g.trans_A if region is g.A else g.trans_B):
            return None
    return partition(g, M, N, num_warps, ctx)


def _starts_addressable(region: ir.BufferRegion, buf: ir.Buffer, k_major: bool) -> bool:
    """Whether a wgmma descriptor can address the shared operand slice at `region`'s start.
    Constant starts always can (the template adds their byte offset). A start computed at run
    time (`KV[:, j * 64:(j + 1) * 64]` in a `T.unroll`) can when it is provably a multiple of
    what one descriptor advance keeps in phase with the swizzle: whole k-steps along K, whole
    8-row groups along a K-major operand's rows, whole swizzle atoms along an MN-major
    operand's columns."""
    row_start, col_start = region.starts[-2:]
    if all(isinstance(s, (int, ir.Const)) for s in (row_start, col_start)):
        return True
    if k_major:  # rows are M (or N), columns are K
        quanta = (8, k_step(buf.dtype))
    else:        # rows are K, columns are M (or N): whole atoms of the swizzle's width
        atom = L.swizzle_mode(buf.shape, buf.dtype.bits) * 8 // buf.dtype.bits
        quanta = (k_step(buf.dtype), atom)
    analyzer = Analyzer()
    return all(analyzer.is_divisible(s, q) for s, q in zip((row_start, col_start), quanta))


def accumulator_layout(g: ir.Gemm, part, ctx):
    wgm, wgn = part
    M, N = g.C.extents[-2:]
    return gemm_sm80._match_rank(_accumulator(M, N, wgm, wgn), g.C.buffer)


def _accumulator(M, N, wgm, wgn) -> Fragment:
    wn = N // wgn
    mr = M // (64 * wgm)
    threads = [(4, (0, 2)), (8, (1, 0)), (4, (16, 0)), (wgm, (64, 0)), (wgn, (0, wn))]
    values = [(2, (0, 1)), (2, (8, 0)), (wn // 8, (0, 8)), (mr, (64 * wgm, 0))]
    return Fragment((M, N), threads, values)


def a_fragment_layout(g: ir.Gemm, part, M, K, ctx):
    """A in registers, replicated over WGN: for 16-bit types the accumulator order of an
    M x K tile; for fp8 the 8-bit wgmma A layout (16 elements per thread per k32 step)."""
    wgm, wgn = part
    mr = M // (64 * wgm)
    if g.A.buffer.dtype.bits == 8:
        # element i of a k32 step: row g + 8*((i>>2)&1), col 4q + (i&3) + 16*(i>>3)
        threads = [(4, (0, 4)), (8, (1, 0)), (4, (16, 0)), (wgm, (64, 0)), (wgn, (0, 0))]
        values = [(4, (0, 1)), (2, (8, 0)), (2, (0, 16)), (K // 32, (0, 32)),
                  (mr, (64 * wgm, 0))]
    else:
        threads = [(4, (0, 2)), (8, (1, 0)), (4, (16, 0)), (wgm, (64, 0)), (wgn, (0, 0))]
        values = [(2, (0, 1)), (2, (8, 0)), (K // 8, (0, 8)), (mr, (64 * wgm, 0))]
    return gemm_sm80._match_rank(Fragment((M, K), threads, values), g.A.buffer)


def shared_operand_layout(buf: ir.Buffer, ctx):
    return L.swizzled(buf.shape, buf.dtype.bits)


def lower_gemm(g: ir.Gemm, ctx, tf32_exact=frozenset()) -> ir.Stmt:
    """The wgmma template call of `g` (wgmma reads float32 operands' bits as they are, so
    `tf32_exact`, the fragments holding TF32 numbers only, changes nothing here)."""
    wgm, wgn = ctx.gemm_info[g.C.buffer][1]
    M, N = g.C.extents[-2:]
    K = g.A.extents[-1] if not g.trans_A else g.A.extents[-2]
    c_reg = ctx.register_of(g.C.buffer)
    clear = ir.as_expr(g.clear_accum) if not isinstance(g.clear_accum, bool) else \
        ir.const(g.clear_accum)
    # wg_wait=n >= 0: the template waits until n wgmma groups are in flight; -1: it only
    # commits (transform/wgmma_wait.py has placed the waits where the result is used)
    wait = max(-1, int(g.wg_wait))
    # a clear known here lets the template drop C's old values (FreshC: tl/gemm_sm90.cuh)
    fresh = ", true" if isinstance(clear, ir.Const) and bool(clear.value) else ""
    b_rows, b_cols, b_swz, b_base, b_r0, b_c0 = gemm_sm80._tile_info(
        g.B, ctx.layouts[g.B.buffer], g.loc)
    tb = "true" if g.trans_B else "false"
    # the warpgroups that compute the gemm are all the compute threads' (partition): one
    # alone has index 0, a constant the operand descriptors fold into (a runtime index kept
    # every k-step's descriptor in vector registers: sparse_mla_fwd_pipelined's 36 + 4 per
    # stage, about 190 more instructions and their registers)
    wg = ir.const(0) if wgm * wgn == 1 else ctx.warpgroup()
    if g.A.buffer.scope == "local.fragment":
        a_reg = ctx.register_of(g.A.buffer)
        name = (f"tl::wgmma_gemm_rs<{M}, {N}, {K}, {wgm}, {wgn}, {tb}, {b_rows}, {b_cols}, "
                f"{b_swz}, {wait}{fresh}>")
        args = (name, a_reg, b_base, b_r0, b_c0, c_reg, clear, wg)
    else:
        a_rows, a_cols, a_swz, a_base, a_r0, a_c0 = gemm_sm80._tile_info(
            g.A, ctx.layouts[g.A.buffer], g.loc)
        ta = "true" if g.trans_A else "false"
        name = (f"tl::wgmma_gemm_ss<{M}, {N}, {K}, {wgm}, {wgn}, {ta}, {tb}, {a_rows}, "
                f"{a_cols}, {a_swz}, {b_rows}, {b_cols}, {b_swz}, {wait}{fresh}>")
        args = (name, a_base, a_r0, a_c0, b_base, b_r0, b_c0, c_reg, clear, wg)
    ctx.uses_wgmma = True
    return ir.Evaluate(ir.Call("call_extern", args, ir.DType("void")), loc=g.loc)


_ = located
