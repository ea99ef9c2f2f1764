"""Attention-shaped grids run as persistent kernels on sm_90a: one block per SM walks the tiles.

Expects: tile IR with pure lets inlined (a loop's trip count is an expression of the block
indices and constants). Applies on sm_90a (warp specialisation not turned off) when the
kernel says nothing about its block order (no `T.use_swizzle`, which also records an explicit
off; no clusters; not cooperative), has no roles of its own (`T.ws`, thread ranges) and no
`while` loop (a block waiting for another's flag relies on launch order), its grid is static
with at least `MIN_WAVES` blocks per SM, and its one T.Pipelined loop has two stages or more,
two gemms, the second multiplying a tile the loop computes (attention's forward pass: S =
Q K^T, then O += P V), tiles loaded at addresses computed from indices alone, and a trip count
that is a constant or depends on the x block index alone (causal attention: query block x
visits x + 1 key tiles); nothing in the kernel is atomic.

Guarantees: the grid becomes one block per SM, min(N, ir.DEVICE_SM_COUNT) blocks sized at the
launch (the threshold above counts the target's nominal SMs: analysis/device_facts.py), whose
body is the old one inside

    w = gridDim.x
    for t in serial(ceil(N / w)):
        p = t * w + (bid if t is even else w - 1 - bid)
        if p < N:
            bx, by, bz = p % gx, p / gx % gy, p / (gx * gy)      # launch order
            <the old body>

over the N = gx * gy * gz blocks of the old grid: every old block runs exactly once, with its
own indices, so the results do not change (blocks of a T.Kernel are independent). What it
buys: the warp-specialised producer loads the next tile's Q and first K/V stages while the
consumers finish this tile and store its output (warp_specialize/tile_nest.py), which a block
per tile leaves exposed at every tile. Blocks running at once still cover a few heads, as in
launch order (their K/V stays in L2). The snake (odd rounds taken from the last SM down)
evens out causal tiles' lengths: straight rounds would give SM w only the query blocks
x = w + (sms mod gx) t, a residue class whose tiles are longer for larger w (12% more work on
the busiest SM than on average at gx = 32; with the snake 1%, the longest-first optimum 0.3%).
H200, FlashAttention as the reference's examples write it (B8 H32 S4096 D128, 128x128 tiles,
2 stages, 256 threads), interleaved runs: causal 2.433 -> 2.235 ms (SDPA 2.057), not causal
4.150 -> 4.054 ms (SDPA 3.754); example_mha_fwd_pipelined 0.96-0.97x -> 0.99-1.00x of SDPA,
causal 1.01-1.02x -> 1.06-1.07x. Where it lost, it does not apply: a one-stage loop (4.50 ->
5.08 ms: one block per tile runs it on the cp.async pipeline, more blocks per SM), the
backward pass (MHA 0.99x -> 0.94x), the native sparse attention's gathered tiles (1.76 ->
2.94 ms).
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import nodes as ir
from ..ir.thread_range import has_user_roles
from ..ir.visitor import any_node, collect
from .analysis.buffer_use import written_buffers
from .analysis.device_facts import nominal_sm_count
from .analysis.numeric import eval_index
from .analysis.scopes import is_global_to_shared
from .pass_config import PassConfigKey

MIN_WAVES = 4  # blocks per SM below which there are too few tile changes to hide


def persistent_grid(kernel: ir.Kernel, ctx) -> ir.Kernel:
    if not ctx.target.is_hopper or ctx.flag(PassConfigKey.TL_DISABLE_WARP_SPECIALIZED) or \
            has_user_roles(kernel) or len(kernel.block_vars) != len(kernel.grid) or \
            any(key in ("use_swizzle", "cluster_dims", "cooperative")
                for key, _ in kernel.attrs):
        return kernel
    extents = [ir.int_value(e) for e in kernel.grid]
    if None in extents or any_node(kernel.body, lambda n: isinstance(n, ir.While)):
        return kernel
    if not _attention_loop(kernel):
        return kernel
    sms = nominal_sm_count(ctx.target)
    n = math.prod(extents)
    if n < MIN_WAVES * sms:
        ctx.note(f"one block per tile: {n} blocks, fewer than {MIN_WAVES} per SM ({sms} SMs) "
                 "for a persistent attention grid to hide tile changes")
        return kernel
    bid, t, p, w = ir.Var("bid"), ir.Var("tile_round"), ir.Var("tile"), ir.Var("workers")
    c = ir.const
    # bid on even rounds, w - 1 - bid on odd ones
    worker = ir.binary("add", bid, ir.binary("mul", ir.binary("floormod", t, 2),
                                             ir.binary("sub", ir.binary("sub", w, c(1)),
                                                       ir.binary("mul", bid, 2))))
    body, stride = kernel.body, 1
    decode = []
    for v, e in zip(kernel.block_vars, extents):
        decode.append((v, ir.binary("floormod", ir.binary("floordiv", p, c(stride)), c(e))))
        stride *= e
    for v, value in reversed(decode):
        body = ir.LetStmt(v, value, body)
    body = ir.LetStmt(p, ir.binary("add", ir.binary("mul", t, w), worker),
                      ir.If(ir.compare("lt", p, c(n)), body, None))
    rounds = ir.binary("floordiv", ir.binary("add", c(n - 1), w), w)
    body = ir.For(t, c(0), rounds, "serial", body)
    body = ir.LetStmt(w, ir.Call("num_blocks", (), ir.INT32), body)
    ctx.note(f"persistent: one block per SM (as many as the GPU has, at the launch) walks the "
             f"{n} blocks of the grid in launch order, snaking over the SMs; the producer "
             "loads the next tile while the consumers finish this one "
             "(T.use_swizzle(enable=False) keeps one block per tile)")
    grid = ir.binary("min", c(n), ir.DEVICE_SM_COUNT)
    return ir.with_fields(kernel, grid=(grid,), block_vars=(bid,), body=body)


def _attention_loop(kernel) -> bool:
    """One T.Pipelined loop, of two stages or more, with two gemms, the second multiplying a
    tile the loop computes (P of P V), tiles loaded at addresses computed from indices alone,
    and a trip count that is a constant or depends on the x block index alone; no atomics."""
    loops = collect(kernel.body, lambda s: isinstance(s, ir.For) and s.kind == "pipelined")
    if len(loops) != 1:
        return False
    (loop,) = loops
    if int(loop.annotation("num_stages", 0) or 0) < 2:
        return False
    loads = collect(loop.body, lambda s: isinstance(s, ir.Copy) and is_global_to_shared(s))
    computed = written_buffers(loop.body) - {c.dst.buffer for c in loads}
    gemms = collect(loop.body, lambda s: isinstance(s, ir.Gemm))
    if len(gemms) != 2 or not (gemms[1].A.buffer in computed or gemms[1].B.buffer in computed):
        return False  # two gemms of loaded tiles (a gated MLP's), a backward pass's four
    from_memory = {let.var for let in collect(loop.body, lambda s: isinstance(s, ir.LetStmt))
                   if any_node(let.value, lambda n: isinstance(n, ir.Load))}
    if any(any_node(c.src, lambda n: isinstance(n, ir.Load) or n in from_memory)
           for c in loads):
        return False  # tiles gathered through indices read from memory (sparse attention)
    if any_node(kernel.body, lambda n: isinstance(n, ir.AtomicTile) or (
            isinstance(n, ir.Call) and n.op.startswith("atomic"))):
        return False  # accumulates across blocks (a backward pass's dQ)
    bx = kernel.block_vars[0]
    try:
        eval_index(loop.start, {})
        eval_index(loop.extent, {bx: np.arange(ir.int_value(kernel.grid[0]))})
    except (KeyError, TypeError):
        return False  # depends on another index or on data
    return True
