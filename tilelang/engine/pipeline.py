"""The CUDA lowering pipeline, top to bottom: one `T.Kernel` of tile IR -> thread IR.

Each step is one pass (its module's docstring says what it expects and guarantees). Set
TILELANG_DUMP_IR=1 (or the pass config tl.enable_dump_ir) to print the IR after every step.
Every transformation a kernel goes through is named here, in order: `BEFORE_KERNELS` (what
runs on the whole traced function), `PASSES` (per kernel), and for a step that lowers
statement by statement, `STEP_PARTS` (the modules of its package, which it applies to each
statement it lowers). Passes import only transform/analysis and the IR, never each other
(tests/test_import_graph.py).
"""

from __future__ import annotations

import sys

from ..ir import nodes as ir
from ..transform.defer_store_waits import defer_store_waits
from ..transform.fold_accumulator_clear import fold_accumulator_clears
from ..transform.guard_global import guard_global_accesses
from ..transform.inline_lets import inline_pure_lets
from ..transform.insert_sync import insert_barriers
from ..transform.layout_inference import infer_layouts
from ..transform.lower_copy import lower_copies
from ..transform.lower_elementwise import lower_elementwise_tile_ops
from ..transform.lower_tile_ops import lower_tile_ops
from ..transform.pack_sub_byte import pack_sub_byte
from ..transform.pair_conversions import pair_conversions
from ..transform.parallel_copies import recognise_parallel_copies
from ..transform.partition_parallel import partition_parallel_loops
from ..transform.pass_config import PassConfigKey
from ..transform.pingpong import schedule_warpgroup_turns
from ..transform.pipeline import pipeline_loops
from ..transform.persistent_grid import persistent_grid
from ..transform.plan_shared import plan_shared_memory
from ..transform.rasterize import rasterize_large_gemms
from ..transform.reducer_fragments import lower_reducers
from ..transform.simplify_stmt import simplify_kernel
from ..transform.stage_epilogue import stage_epilogues
from ..transform.stage_fragment_atomics import stage_fragment_atomics
from ..transform.tma_reduce import lower_tma_atomics
from ..transform.unroll_fragment_offsets import unroll_fragment_offsets
from ..transform.unswitch_masks import unswitch_masks
from ..transform.warp_roles import assign_warp_roles
from ..transform.warp_specialize import warp_specialize
from ..transform.wgmma_wait import place_wgmma_waits
from ..transform.widen_indices import widen_indices
from .context import KernelContext


def _on_body(fn):
    def step(kernel, ctx):
        body = fn(kernel.body)
        return kernel if body is kernel.body else ir.with_fields(kernel, body=body)
    step.transformation = fn  # the pass (its module) behind the step
    return step


PASSES = [
    # tile level
    ("inline_pure_lets", _on_body(inline_pure_lets)),          # whole index expressions
    ("reducer_fragments", lower_reducers),                     # reducers: register partials
    ("parallel_copies", _on_body(recognise_parallel_copies)),  # global->shared loops -> copy
    ("stage_fragment_atomics", stage_fragment_atomics),        # experiment: fragment adds by TMA
    ("warp_roles", assign_warp_roles),                         # tile ops on a role's threads
    ("rasterize", rasterize_large_gemms),                      # panelled launch of big GEMMs
    ("persistent_grid", persistent_grid),                      # sm_90a: attention persistent
    ("pack_sub_byte", pack_sub_byte),                          # int4 buffers -> their bytes
    ("lower_elementwise", _on_body(lower_elementwise_tile_ops)),  # copy/fill/atomic -> loops
    ("unroll_fragment_offsets", _on_body(unroll_fragment_offsets)),  # acc[i + s * 32]
    ("unswitch_masks", unswitch_masks),                        # masks decided per tile
    ("infer_layouts", infer_layouts),                          # fragments, shared tiles, loops
    ("warp_specialize", warp_specialize),                      # sm_90a: TMA + producer WG
    ("pipeline", pipeline_loops),                              # T.Pipelined -> cp.async stages
    ("pingpong", schedule_warpgroup_turns),                    # sm_90a: warpgroups take turns
    ("wgmma_waits", place_wgmma_waits),                        # sm_90a: waits for async wgmma
    ("fold_clears", fold_accumulator_clears),                  # sm_90a: clear -> wgmma scale-d
    ("tma_reduce", lower_tma_atomics),                         # T.atomic_add(use_tma=True) -> TMA
    ("stage_epilogue", stage_epilogues),                       # epilogues staged through shared
    ("lower_copies", lower_copies),                            # copies -> cp.async / TMA / loops
    ("lower_tile_ops", lower_tile_ops),                        # gemm, reduce, scan, print
    # thread level
    ("partition_parallel", partition_parallel_loops),          # T.Parallel -> per-thread loops
    ("widen_indices", widen_indices),                          # int64 offsets for huge tensors
    ("guard_global", guard_global_accesses),                   # out-of-bounds semantics
    ("plan_shared", plan_shared_memory),                       # one arena, physical offsets
    ("insert_sync", insert_barriers),                          # __syncthreads where needed
    ("defer_store_waits", defer_store_waits),                  # sm_90a: TMA store waits late
    ("simplify", simplify_kernel),                             # readable indices
    ("pair_conversions", _on_body(pair_conversions)),          # two casts per instruction
]

# Before a kernel reaches PASSES, on the traced PrimFunc, in this order (module: where it runs).
BEFORE_KERNELS = [
    ("semantic_check", "frontend/trace.py: when a trace finishes, the reference's rejections"),
    ("uninitialized_reads", "jit: warnings for registers read before anything writes them"),
    ("align_sizes", "engine/build.py: a build for dynamic sizes that are multiples of 16 bytes"),
]

# The parts a step applies to each statement it lowers (modules of the step's package), in
# the order it tries them.
STEP_PARTS = {
    "warp_specialize": ("tile_nest",          # the loops around a pipelined loop in a tile loop
                        "tma_im2col",         # a T.c2d_im2col gather as one TMA im2col load
                        "computed_operands"),  # operands the consumers compute, double-buffered
    "lower_copies": ("lower_tma_copy", "copy_tma"),  # T.tma_copy as TMA boxes; T.copy by TMA
    "lower_tile_ops": ("lower_reduce",),      # reductions and scans
    "partition_parallel": ("async_gather",    # a gather issued ahead as cp.async with zero-fill
                           "stmatrix",        # a whole 16-bit tile from mma registers (sm_90+)
                           "vectorize",       # a thread's values as vector accesses
                           "pair_lanes"),     # two lanes at a time (half2/bfloat162)
}


def lower_kernel(func: ir.PrimFunc, kernel: ir.Kernel, index: int, target, configs: dict,
                 verbose=False):
    ctx = KernelContext(func, kernel, target, configs, index)
    dump = ctx.flag(PassConfigKey.TL_ENABLE_DUMP_IR) or _env_dump()
    k = kernel
    for name, step in PASSES:
        k = step(k, ctx)
        if dump:
            from ..ir.printer import print_node

            print(f"# ---- after {name} ({func.name}, kernel {index}) ----", file=sys.stderr)
            print(print_node(k), file=sys.stderr)
    _fast_math_hint(k, ctx)
    if verbose:
        for line in ctx.notes:
            print(f"[tilelang] {func.name}: {line}", file=sys.stderr)
    return k, ctx


def _fast_math_hint(kernel, ctx):
    """A note when float32 exp/exp2 compile to the subnormal-safe library functions or float32
    divisions to IEEE division, and what fast math would make of them."""
    from ..ir.visitor import any_node, collect

    if ctx.flag(PassConfigKey.TL_ENABLE_FAST_MATH) and not ctx.flag(
            PassConfigKey.TL_DISABLE_FAST_MATH):
        return
    ops = sorted({c.op for c in collect(kernel.body, lambda n: isinstance(n, ir.Call) and n.op
                                        in ("exp", "exp2") and n.dtype.name == "float32")})
    if not ops:
        return  # a division alone is rarely where a kernel's time goes
    divides = any_node(kernel.body, lambda n: isinstance(n, ir.Binary) and n.op == "div"
                       and n.dtype.name == "float32")
    division = (", and its float32 divisions IEEE-rounded (a reciprocal, its refinement and a "
                "range check each)") if divides else ""
    ctx.note(f"{'/'.join(ops)} without fast math: accurate library calls (exp2f alone rescales "
             f"results that would be subnormal: 4 instructions){division}; pass_configs="
             "{'tl.enable_fast_math': True} makes exp2 one ex2.approx.ftz"
             + (" and a division approximate" if divides else "")
             + " (FlashAttention as the reference's examples write it, on an H200: 0.93x -> "
             "1.00x of SDPA)")


def _env_dump() -> bool:
    from ..env import env

    return env.dump_ir
