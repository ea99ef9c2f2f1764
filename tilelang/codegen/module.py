"""Assemble the CUDA source of a whole PrimFunc: one `__global__` function per `T.Kernel`
(lowered by the pipeline), plus the launch description the host side needs.
"""

from __future__ import annotations

import re

from ..env import env
from ..ir import nodes as ir
from ..ir.visitor import any_node
from ..transform.analysis.alignment import vector_alignment
from ..transform.analysis.device_facts import nominal_sm_count
from ..transform.pass_config import PassConfigKey
from .cuda import CudaPrinter, c_identifier, ctype
from .library import library_includes
from .launch import CudaModuleSource, KernelLaunch, signature_params


def _param_decl(p, printer, restrict=True) -> str:
    if hasattr(p, "box"):  # a TMA descriptor
        return f"const __grid_constant__ CUtensorMap {printer.name(p.param)}"
    if isinstance(p, ir.Buffer):
        qualifier = " __restrict__" if restrict else ""
        return f"{ctype(p.dtype)}*{qualifier} {printer.name(p)}"
    if p.dtype.is_handle:
        return f"void* {printer.name(p)}"
    return f"{ctype(p.dtype)} {printer.name(p)}"


def _grid_within_sms(k: ir.Kernel, ctx) -> bool:
    """Whether the grid is a constant number of blocks no larger than the target's SM count
    and the kernel keeps no cp.async pipeline: each SM then runs at most one block, and
    telling ptxas so (`__launch_bounds__(threads, 1)`) lets it spend registers on loads in
    flight instead of on occupancy the launch cannot use (H200: the naive GEMV's 32 blocks
    85.6 -> 71.1 µs, 32 -> 142 registers; the split GQA decode's combine 3.8 -> 3.3). A
    pipeline has its loads in flight already; with the registers free, ptxas moved the
    pipelined GEMV's vector load of x after the stage refill (16.1 -> 16.8 µs)."""
    if any_node(k.body, lambda n: ir.is_extern_call(n) and n.args[0] == "tl::cp_async_commit"):
        return False
    blocks = 1
    for g in k.grid:
        g = ir.int_value(g)
        if g is None:  # sized at launch (a symbol, a persistent grid's SM count)
            return False
        blocks *= g
    return blocks <= nominal_sm_count(ctx.target)


def render_kernel(name: str, k: ir.Kernel, ctx, params, symbols, workspaces, tma=()) -> str:
    fast = ctx.flag(PassConfigKey.TL_ENABLE_FAST_MATH) and not ctx.flag(
        PassConfigKey.TL_DISABLE_FAST_MATH)
    p = CudaPrinter(fast_math=fast, sm=ctx.target.sm or 0)
    for v, g in zip(k.block_vars, k.grid):
        p.analyzer.bind(v, 0, g)
    for v, t in zip(k.thread_vars, k.threads):
        p.analyzer.bind(v, 0, t)
    if len(k.threads) == 1:
        p.block_thread = k.thread_vars[0]
    # A kernel that waits for the previous one of its stream (T.pdl_sync) reads what that one
    # wrote while it ran: __restrict__ would let its loads go through the read-only cache
    # (ld.global.nc) or move above the wait.
    restrict = not any_node(k.body, lambda n: isinstance(n, ir.Call) and n.op == "pdl_sync")
    decls = [_param_decl(x, p, restrict) for x in params + symbols + workspaces + list(tma)]
    threads = k.num_threads
    min_blocks = k.attr("min_blocks_per_sm")  # T.annotate_min_blocks_per_sm
    # (`__launch_bounds__(threads, 1)` on every kernel, as the reference writes them, was
    # timed on an H200: the dequantising GEMV 10.7 -> 10.5 µs, the fp4 Hopper GEMM 282.9 ->
    # 285.2, the others unchanged; warp-specialised kernels and small constant grids take it)
    one_block = k.attr("warp_specialized") or _grid_within_sms(k, ctx)
    bounds = f"{threads}, {min_blocks}" if min_blocks else \
        f"{threads}, 1" if one_block else f"{threads}"
    cluster = k.attr("cluster_dims")
    if cluster and ctx.target.sm < 90:
        ctx.note(f"cluster_dims={cluster} ignored: thread block clusters need sm_90")
        cluster = None
    cluster = f" __cluster_dims__({', '.join(map(str, cluster))})" if cluster else ""
    head = (f'extern "C" __global__ void __launch_bounds__({bounds}){cluster} {name}('
            f'{", ".join(decls)}) {{')
    lines = [head]
    p.indent = 1
    if ctx.smem_bytes:
        p.emit("extern __shared__ __align__(1024) unsigned char smem[];")
        for buf, off in sorted(ctx.shared_plan.items(), key=lambda kv: kv[1]):
            p.emit(f"{ctype(buf.dtype)}* {p.name(buf)} = reinterpret_cast<{ctype(buf.dtype)}*>"
                   f"(smem + {off});")
    swizzle = k.attr("use_swizzle")
    axes = "xyz"
    if swizzle is not None and len(k.grid) >= 2:
        panel, order = swizzle
        fn = "rasterize_row" if order == "row" else "rasterize_col"
        p.emit(f"const int2 block_ = tl::{fn}({panel}, blockIdx.x, blockIdx.y, gridDim.x, "
               f"gridDim.y);")
        p.emit(f"const int {p.name(k.block_vars[0])} = block_.x;")
        p.emit(f"const int {p.name(k.block_vars[1])} = block_.y;")
        for d, v in enumerate(k.block_vars[2:], start=2):
            p.emit(f"const int {p.name(v)} = blockIdx.{axes[d]};")
    else:
        for d, v in enumerate(k.block_vars):
            p.emit(f"const int {p.name(v)} = blockIdx.{axes[d]};")
    for d, v in enumerate(k.thread_vars):
        p.emit(f"const int {p.name(v)} = threadIdx.{axes[d]};")
    for frag, reg in ctx.registers.items():
        n = reg.shape[0]
        p.emit(f"{ctype(reg.dtype)} {p.name(reg)}[{n}];")
    p.stmt(k.body)
    lines.extend(p.lines)
    lines.append("}")
    return "\n".join(lines)


HEADER = """// Generated by tilelang (pure-Python TileLang) for {arch}: {func}
{select}{library}"""

# The block gemm templates' calls as module.py renders them (codegen/gemm_sm90.py):
# tl::wgmma_gemm_ss<M, N, K, WGM, WGN, ...> / tl::wgmma_gemm_rs<M, N, K, WGM, WGN, ...>.
_WGMMA_GEMM = re.compile(r"\btl::wgmma_gemm_(?:ss|rs)\s*<" + r"\s*,".join([r"\s*(\d+)"] * 5) + ",")
# Anything else that reaches the wgmma wrappers by name (hand-written CUDA in the kernel).
_WGMMA_DIRECT = re.compile(r"\bwgmma_(?:ss|rs|m64n)")
_FP8 = re.compile(r"\b(?:fp8_e[45]_t|__nv_fp8)")


def wgmma_select(kernel_sources, imported=()) -> str:
    """`#define`s that make tl/wgmma_ops*.cuh define only the wgmma shapes the kernels issue
    (TL_WGMMA_SELECT + TL_WGMMA_N<N> per warpgroup tile width N; TL_WGMMA_FP8 when an 8-bit
    float type appears): the full tables are most of the headers' parse time (about 30 ms of
    NVRTC's front end on sm_90a). Nothing is restricted when hand-written CUDA (import_source
    or a direct wrapper call) might use other shapes."""
    if imported or any(_WGMMA_DIRECT.search(s) for s in kernel_sources):
        return ""
    ns = sorted({int(m.group(2)) // int(m.group(5)) for s in kernel_sources
                 for m in _WGMMA_GEMM.finditer(s)})
    lines = ["#define TL_WGMMA_SELECT"] + [f"#define TL_WGMMA_N{n}" for n in ns]
    if any(_FP8.search(s) for s in kernel_sources):
        lines.append("#define TL_WGMMA_FP8")
    return "\n".join(lines) + "\n"


# TL_EXPERIMENT switches that select a header variant -> the macro that selects it.
_HEADER_EXPERIMENTS = {
    # the compiler may share wgmma descriptors between gemms again (tl/gemm_sm90.cuh)
    "shared_wgmma_desc": "TL_WGMMA_SHARED_DESC",
}


def experiment_defines() -> str:
    """`#define`s of the TL_EXPERIMENT switches that select a header variant, for an A/B timing
    of both in one GPU run (_HEADER_EXPERIMENTS)."""
    return "".join(f"#define {macro}\n" for name, macro in _HEADER_EXPERIMENTS.items()
                   if name in env.experiments)


def render_module(func: ir.PrimFunc, lowered, arch: str) -> CudaModuleSource:
    """`lowered`: list of (kernel IR, KernelContext) for every T.Kernel of `func`."""
    params, symbols, workspaces = signature_params(func)
    imported = [src.strip() + "\n" for src in func.attrs.get("import_source", [])]
    launches, kernels = [], []
    tma = [d for _, ctx in lowered for d in ctx.tma_descriptors]
    for i, (k, ctx) in enumerate(lowered):
        name = c_identifier(f"{func.name}_kernel" + (f"_{i}" if i else ""))
        kernels.append(render_kernel(name, k, ctx, params, symbols, workspaces, tma) + "\n")
        grid = tuple(k.grid) + (1,) * (3 - len(k.grid))
        block = tuple(k.threads) + (1,) * (3 - len(k.threads))
        launches.append(KernelLaunch(name, grid, block, ctx.smem_bytes,
                                     list(ctx.notes), bool(k.attr("cooperative"))))
    parts = [HEADER.format(arch=arch, func=func.name, select=experiment_defines()
                           + wgmma_select(kernels, imported),
                           library=library_includes(kernels, imported))]
    if any(ctx.gemm_info for _, ctx in lowered):
        parts.append('#include "tl/gemm_sm80.cuh"\n')
    if any(ctx.uses_gemm_sp for _, ctx in lowered):
        parts.append('#include "tl/gemm_sp_sm80.cuh"\n')
    if any(ctx.uses_wgmma for _, ctx in lowered):
        parts.append('#include "tl/gemm_sm90.cuh"\n')
    parts.append('#include "tl/tile_copy.cuh"\n')
    if any(launch.cooperative for launch in launches):  # T.sync_grid's grid barrier
        parts.append('#include <cooperative_groups.h>\n')
    parts += imported + kernels
    zeroed = func.attrs.get("zeroed_workspaces") or ()
    zeroed_idx = tuple(i for i, w in enumerate(workspaces) if any(w is z for z in zeroed))
    need: dict = {}
    for k, _ in lowered:
        for buf, nbytes in vector_alignment(k.body).items():
            need[buf] = max(need.get(buf, 0), nbytes)
    aligned = tuple((i, need[p]) for i, p in enumerate(params) if p in need)
    return CudaModuleSource("\n".join(parts), launches, params, symbols, workspaces, arch, tma,
                            zeroed_idx, aligned)
