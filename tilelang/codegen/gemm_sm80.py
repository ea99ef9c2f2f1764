"""`T.gemm` on mma.sync (sm_80+): warp partition, operand layouts, and the template call.

The layouts returned here and the register conventions of `tl/gemm_sm80.cuh` describe the same
maps (see the header's comment); `tilelang.layout.mma_accumulator` is the accumulator.

Gemms mma.sync cannot do (float64 operands; any target before sm_80) run on the CUDA cores
(`tl::gemm_fma_ss`: one multiply-add per element and k) with the same accumulator layout, so
layout inference does not know the difference; their operands must be in shared memory.
"""

from __future__ import annotations

from ..errors import KernelNotSupportedError, located
from ..ir import nodes as ir
from ..ir.dtype import GEMM_ACCUMULATORS, PACKED_INTS
from .. import layout as L

# A/B dtype -> accumulator dtypes of mma.sync: the language's gemms (checked at trace time)
# but float64, which runs on the CUDA cores
SUPPORTED = {k: v for k, v in GEMM_ACCUMULATORS.items() if k != "float64"}

# A/B dtype -> accumulators of the CUDA-core gemm (float64; every target before sm_80)
FMA_SUPPORTED = {k: v for k, v in GEMM_ACCUMULATORS.items()
                 if not k.startswith("float8") and k not in PACKED_INTS}


def _err(loc, msg):
    raise located(ValueError)(msg, loc)


def partition(g: ir.Gemm, M, N, num_warps, ctx):
    """(warp_m, warp_n, copies): a grid of all the block's warps over the tile, each warp owning
    whole 16 x 8 mma atoms (copies 1). A tile no such grid covers is an error, as in the
    reference, which would otherwise leave rows or columns unwritten (its issue 2537) --
    except on the CUDA cores and for `T.gemm_sp`, where a smaller grid computes the tile and
    the remaining warps duplicate its work."""
    from ..transform.layout_inference import warp_partition

    part = warp_partition(M, N, num_warps, g.policy)
    if part is not None:
        return (part[0], part[1], 1)
    if not isinstance(g, ir.GemmSp) and not uses_fma(g, ctx):
        _err(g.loc, f"No valid warp partition for T.gemm: M={M}, N={N} cannot be evenly "
                    f"covered by {num_warps} warps (policy={g.policy}). Each warp must own a "
                    f"multiple of 16 rows and 8 columns of the {M}x{N} tile; adjust `threads` "
                    "or the block tile shape")
    for used in range(num_warps - 1, 0, -1):
        if num_warps % used:
            continue
        part = warp_partition(M, N, used, g.policy)
        if part is not None:
            return (part[0], part[1], num_warps // used)
    return None


def _replicate(frag, copies):
    """The same tile held by `copies` groups of warps (extra warps duplicate the work)."""
    if copies == 1:
        return frag
    zero = (0,) * len(frag.shape)
    return L.Fragment(frag.shape, list(frag.thread_modes) + [(copies, zero)],
                      list(frag.value_modes))


def accumulator_layout(g: ir.Gemm, part, ctx):
    M, N = g.C.extents[-2:]
    frag = _replicate(L.mma_accumulator(M, N, part[0], part[1]), part[2])
    return _match_rank(frag, g.C.buffer)


def a_fragment_layout(g: ir.Gemm, part, M, K, ctx):
    _check_dtypes(g, ctx)  # before asking for an operand layout the dtype may not have
    frag = _replicate(L.mma_a_fragment(M, K, part[0], part[1], g.A.buffer.dtype.bits), part[2])
    return _match_rank(frag, g.A.buffer)


def b_fragment_layout(g: ir.Gemm, part, K, N, ctx):
    _check_dtypes(g, ctx)
    frag = _replicate(L.mma_b_fragment(K, N, part[0], part[1], g.B.buffer.dtype.bits), part[2])
    return _match_rank(frag, g.B.buffer)


def _match_rank(frag, buf):
    """A 2-D instruction layout on a buffer with leading unit dims."""
    from ..transform.analysis.fragment_ops import insert_unit_dim

    while len(frag.shape) < buf.ndim:
        frag = insert_unit_dim(frag, 0)
    return frag


def shared_operand_layout(buf: ir.Buffer, ctx):
    return L.swizzled(buf.shape, buf.dtype.bits)


def uses_fma(g: ir.Gemm, ctx) -> bool:
    """Whether gemm `g` runs on the CUDA cores (see the module docstring)."""
    a, c = g.A.buffer.dtype, g.C.buffer.dtype
    if ctx is not None and 0 < ctx.target.sm < 80:
        return True
    return a.name not in SUPPORTED


def _check_dtypes(g: ir.Gemm, ctx=None):
    a, b, c = g.A.buffer.dtype, g.B.buffer.dtype, g.C.buffer.dtype
    if g.packed is not None and ctx is not None and 0 < ctx.target.sm < 80:
        _err(g.loc, f"T.gemm on {g.packed} operands needs the mma.sync .s4 / .u4 tensor-core "
                    f"instructions of sm_80 or newer; the target is {ctx.target.arch}")
    if uses_fma(g, ctx):
        if a is not b:
            _err(g.loc, f"T.gemm operands A ({a}) and B ({b}) must have the same dtype")
        if c.name not in FMA_SUPPORTED.get(a.name, ()):
            _err(g.loc, f"T.gemm with {a} operands accumulating into {c} is not supported on "
                        f"the CUDA cores (used for float64 and before sm_80; supported: " +
                 ", ".join(f"{k}->{'/'.join(v)}" for k, v in FMA_SUPPORTED.items()) + ")")
        if g.A.buffer.scope == "local.fragment" or g.B.buffer.scope == "local.fragment":
            raise KernelNotSupportedError(
                f"T.gemm on the CUDA cores ({a} operands, or a target before sm_80) takes A and "
                "B from shared memory; copy the register operand to a T.alloc_shared buffer "
                "first", g.loc)
        return
    if a.is_float8 and ctx is not None and ctx.target.sm < 89:
        _err(g.loc, f"T.gemm on {a} needs FP8 tensor cores (sm_89 or newer); the target is "
                    f"{ctx.target.arch}")
    allowed = SUPPORTED.get(a.name)
    if allowed is None or c.name not in allowed:
        raise KernelNotSupportedError(
            f"T.gemm with {a} operands accumulating into {c} is not supported on mma.sync "
            f"yet (supported: " + ", ".join(f"{k}->{'/'.join(v)}" for k, v in SUPPORTED.items())
            + "); the CPU interpreter runs it", g.loc)


def _tile_info(region: ir.BufferRegion, layout, loc):
    """(rows, cols, swizzle bytes, base pointer expr, row0, col0) of a shared operand region."""
    buf = region.buffer
    rows, cols = buf.shape[-2], buf.shape[-1]
    swz = getattr(layout, "swizzle_bytes", None) or 0
    if not (swz or layout.is_row_major()):
        _err(loc, f"T.gemm operand {buf.name} has a layout the mma lowering cannot address "
                  f"({layout!r}); use a swizzled or row-major shared layout")
    starts = [ir.as_expr(s) for s in region.starts]
    lead = tuple(starts[:-2]) + (ir.const(0), ir.const(0))
    base = ir.Call("address_of", (ir.Load(buf, lead, buf.dtype),), ir.DType("handle"))
    return rows, cols, swz, base, starts[-2], starts[-1]


def _operand(region, trans, ctx, loc, tf32_exact=frozenset()):
    """(call arguments, template arguments, "r" | "s") of one operand: a register array (its
    registers hold the instruction's operand layout whatever the transpose flag said: layout
    inference laid the fragment out so; one of `tf32_exact` goes to the mma unrounded), or a
    shared tile with its transpose and geometry."""
    buf = region.buffer
    if buf.scope == "local.fragment":
        reg = ctx.register_of(buf)
        if buf in tf32_exact:
            reg = ir.Call("call_extern", ("tl::as_tf32_exact", reg), ir.DType("handle"))
        return (reg,), "", "r"
    rows, cols, swz, base, r0, c0 = _tile_info(region, ctx.layouts[buf], loc)
    return (base, r0, c0), f"{'true' if trans else 'false'}, {rows}, {cols}, {swz}", "s"


def lower_gemm(g: ir.Gemm, ctx, tf32_exact=frozenset()) -> ir.Stmt:
    """The template call of `g`; its float32 register operands in `tf32_exact` (fragments that
    hold TF32 numbers only: transform/analysis/exact_values.py) skip the rounding to TF32."""
    _check_dtypes(g, ctx)
    wm, wn, copies = ctx.gemm_info[g.C.buffer][1]
    tid = ctx.tid if copies == 1 else ir.binary("floormod", ctx.tid, 32 * wm * wn)
    M, N = g.C.extents[-2:]
    K = g.A.extents[-1] if not g.trans_A else g.A.extents[-2]
    fma = uses_fma(g, ctx)
    k_atom = 1 if fma else L.mma_k_tile(g.A.buffer.dtype.bits)
    if K % k_atom:
        per_byte = 2 if g.packed is not None else 1  # packed regions count bytes
        _err(g.loc, f"T.gemm K = {K * per_byte} must be a multiple of {k_atom * per_byte} for "
                    f"{g.packed or g.A.buffer.dtype}")
    c_reg = ctx.register_of(g.C.buffer)
    clear = ir.as_expr(g.clear_accum) if not isinstance(g.clear_accum, bool) else \
        ir.const(g.clear_accum)
    shape = f"{M}, {N}, {K}, {wm}, {wn}"
    a_args, a_tmpl, a_kind = _operand(g.A, g.trans_A, ctx, g.loc, tf32_exact)
    b_args, b_tmpl, b_kind = _operand(g.B, g.trans_B, ctx, g.loc, tf32_exact)
    if g.packed is not None:  # byte tiles of two 4-bit values (tl/gemm_sm80.cuh)
        pair = f"tl::as_packed<tl::{'s' if g.packed.kind == 'i' else 'u'}4x2_t>"
        a_args = (ir.Call("call_extern", (pair, a_args[0]), ir.DType("handle")),) + a_args[1:]
        b_args = (ir.Call("call_extern", (pair, b_args[0]), ir.DType("handle")),) + b_args[1:]
    if a_kind + b_kind == "ss":  # gemm_ss takes both transposes first
        ta, a_rest = a_tmpl.split(", ", 1)
        tb, b_rest = b_tmpl.split(", ", 1)
        a_tmpl, b_tmpl = f"{ta}, {tb}, {a_rest}", b_rest
    tmpl = ", ".join(x for x in (shape, a_tmpl, b_tmpl) if x)
    if fma and a_kind + b_kind != "ss":
        raise located(NotImplementedError)(
            "a T.gemm on the CUDA cores (float64, or a target before sm_80) takes A and B from "
            "shared memory", g.loc)
    name = f"tl::gemm_{'fma_' if fma else ''}{a_kind}{b_kind}<{tmpl}>"
    args = (name,) + a_args + b_args + (c_reg, clear, tid)
    return ir.Evaluate(ir.Call("call_extern", args, ir.DType("void")), loc=g.loc)
