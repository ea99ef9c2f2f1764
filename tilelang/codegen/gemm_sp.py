"""`T.gemm_sp` on mma.sp (sm_80+, sm_90a too): warp partition, operand layouts, and the
template call (`tl::gemm_sp` of tl/gemm_sp_sm80.cuh).

One mma.sp reads A as the dense mma's A fragment of the compressed tile and B as two dense B
fragments (see the header), so the layouts are gemm_sm80's: the accumulator, A in registers
as `mma_a_fragment` of the M x K/2 tile of kept values, B in registers as `mma_b_fragment` of
the K x N tile, each transposed when the operand is stored transposed. E stays in shared
memory: the template assembles each lane's metadata register from it.
"""

from __future__ import annotations

from .. import layout as L
from ..errors import KernelNotSupportedError, located
from ..ir import nodes as ir
from . import gemm_sm80

# A/B dtype -> accumulator dtypes of mma.sp (B has A's dtype)
SUPPORTED = {"float16": ("float32", "float16"), "bfloat16": ("float32",),
             "float32": ("float32",), "int8": ("int32",), "uint8": ("int32",),
             "float8_e4m3": ("float32",), "float8_e5m2": ("float32",)}

accumulator_layout = gemm_sm80.accumulator_layout
shared_operand_layout = gemm_sm80.shared_operand_layout


def partition(g: ir.GemmSp, M, N, num_warps, ctx):
    return gemm_sm80.partition(g, M, N, num_warps, ctx)


def _check_dtypes(g: ir.GemmSp, ctx):
    a, b, c = g.A.buffer.dtype, g.B.buffer.dtype, g.C.buffer.dtype
    if a.is_float8 and ctx.target.sm < 89:
        raise located(ValueError)(f"T.gemm_sp on {a} needs FP8 tensor cores (sm_89 or newer); "
                                  f"the target is {ctx.target.arch}", g.loc)
    if a != b or c.name not in SUPPORTED.get(a.name, ()):
        raise KernelNotSupportedError(
            f"T.gemm_sp with {a} x {b} operands accumulating into {c} is not supported on "
            "mma.sp (supported: A and B of one dtype, " +
            ", ".join(f"{k}->{'/'.join(v)}" for k, v in SUPPORTED.items()) +
            "); the CPU interpreter runs it", g.loc)


def a_fragment_layout(g: ir.GemmSp, part, M, K, ctx):
    """A's kept values in registers (K: their extent, half the product's K), over the logical
    M x K operand (layout inference transposes it for transpose_A)."""
    _check_dtypes(g, ctx)
    frag = L.mma_a_fragment(M, K, part[0], part[1], g.A.buffer.dtype.bits)
    return gemm_sm80._match_rank(gemm_sm80._replicate(frag, part[2]), g.A.buffer)


def b_fragment_layout(g: ir.GemmSp, part, K, N, ctx):
    """B in registers over the logical K x N operand; K is the product's (the caller's K is
    A_sparse's, half of it)."""
    _check_dtypes(g, ctx)
    K = g.B.extents[-1] if g.trans_B else g.B.extents[-2]
    frag = L.mma_b_fragment(K, N, part[0], part[1], g.B.buffer.dtype.bits)
    return gemm_sm80._match_rank(gemm_sm80._replicate(frag, part[2]), g.B.buffer)


def _operand(region: ir.BufferRegion, trans: bool, ctx, loc):
    """(template operand type, pointer, r0, c0) of A or B."""
    buf = region.buffer
    if buf.scope == "local.fragment":
        return "tl::RegOperand", ctx.register_of(buf), ir.const(0), ir.const(0)
    rows, cols, swz, base, r0, c0 = gemm_sm80._tile_info(region, ctx.layouts[buf], loc)
    t = "true" if trans else "false"
    return f"tl::SmemOperand<{t}, {rows}, {cols}, {swz}>", base, r0, c0


def lower_gemm(g: ir.GemmSp, ctx, tf32_exact=frozenset()) -> ir.Stmt:
    """The mma.sp template call of `g` (its operands are rounded to TF32 in the template;
    `tf32_exact` is not used)."""
    _check_dtypes(g, ctx)
    wm, wn, copies = ctx.gemm_info[g.C.buffer][1]
    tid = ctx.tid if copies == 1 else ir.binary("floormod", ctx.tid, 32 * wm * wn)
    M, N = g.C.extents[-2:]
    K = 2 * (g.A.extents[-1] if not g.trans_A else g.A.extents[-2])
    k_atom = 2 * L.mma_k_tile(g.A.buffer.dtype.bits)
    if K % k_atom:
        raise located(ValueError)(f"T.gemm_sp K = {K} must be a multiple of {k_atom} (the K of "
                                  f"one mma.sp) for {g.A.buffer.dtype}", g.loc)
    op_a, a_ptr, a_r0, a_c0 = _operand(g.A, g.trans_A, ctx, g.loc)
    op_b, b_ptr, b_r0, b_c0 = _operand(g.B, g.trans_B, ctx, g.loc)
    e_rows, e_cols, e_swz, e_ptr, e_r0, e_c0 = gemm_sm80._tile_info(
        g.E, ctx.layouts[g.E.buffer], g.loc)
    te = "true" if g.trans_E else "false"
    clear = ir.as_expr(g.clear_accum) if not isinstance(g.clear_accum, bool) else \
        ir.const(g.clear_accum)
    name = (f"tl::gemm_sp<{M}, {N}, {K}, {wm}, {wn}, {op_a}, {op_b}, {te}, {e_rows}, "
            f"{e_cols}, {e_swz}>")
    args = (name, a_ptr, a_r0, a_c0, e_ptr, e_r0, e_c0, b_ptr, b_r0, b_c0,
            ctx.register_of(g.C.buffer), clear, tid)
    ctx.uses_gemm_sp = True
    return ir.Evaluate(ir.Call("call_extern", args, ir.DType("void")), loc=g.loc)
