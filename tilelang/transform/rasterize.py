"""Launch the blocks of a large GEMM in panels, for L2 reuse, when the user did not choose.

Expects: tile IR after `parallel_copies` (global->shared loads are `Copy` nodes). Applies when
the kernel says nothing about rasterisation (no `T.use_swizzle`, which also records an
explicit off), is not launched in clusters (whose blocks share tiles in launch order), its
grid has at least two static dimensions holding `MIN_BLOCKS` or more blocks, and a pipelined loop copies one tile that depends on the block's y index and not
its x index and another that depends on x and not y: the signature of C[y, x] = A[y, :] @
B[:, x], where blocks in launch order share A's rows only and reread all of B from L2.

Guarantees: such a kernel gets ("use_swizzle", (PANEL, "row")): codegen renumbers the blocks
with `tl::rasterize_row`, a bijection of the grid, so every block still runs once and the
results do not change; concurrently running blocks then cover a few rows and a few columns
of tiles. Everything else is unchanged. (GEMM 8192^3 on an H200: 0.90-0.94x cuBLAS in launch
order, 0.98-0.99x with panels of 8 rows, same run; 4096^3 on 128x128x32 tiles, a slow
mma-class config, within 0.5% either way.)
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import collect

PANEL = 8
MIN_BLOCKS = 512  # 4096^3 on 128x256 tiles: 0.954-0.957x -> 0.963-0.968x cuBLAS, paired


def rasterize_large_gemms(kernel: ir.Kernel, ctx) -> ir.Kernel:
    if any(key in ("use_swizzle", "cluster_dims") for key, _ in kernel.attrs) or \
            len(kernel.block_vars) < 2:
        return kernel
    extents = [ir.int_value(e) for e in kernel.grid[:2]]
    if None in extents or extents[0] * extents[1] < MIN_BLOCKS:
        return kernel
    bx, by = kernel.block_vars[:2]
    seen = set()
    for loop in collect(kernel.body, lambda n: isinstance(n, ir.For) and n.kind == "pipelined"):
        for copy in collect(loop.body, lambda n: isinstance(n, ir.Copy)):
            if copy.src.buffer.scope != "global":
                continue
            used = set(collect(copy.src, lambda n: isinstance(n, ir.Var)))
            seen.add((bx in used, by in used))
    if (True, False) in seen and (False, True) in seen:
        ctx.note(f"blocks launched in panels of {PANEL} rows for L2 reuse (a GEMM-like grid "
                 f"of {extents[0]}x{extents[1]}; T.use_swizzle(enable=False) keeps launch "
                 "order)")
        return ir.with_fields(kernel, attrs=kernel.attrs + (("use_swizzle", (PANEL, "row")),))
    return kernel
