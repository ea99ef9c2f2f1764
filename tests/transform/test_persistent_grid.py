"""Attention-shaped grids as persistent kernels (transform/persistent_grid.py): on sm_90a, a grid
of many blocks whose pipelined loop multiplies a tile it computes (P V) becomes one block per
SM walking every old block exactly once, snaking over the SMs; never where the order or the
schedule is the user's, for other loops (one stage, two gemms of loaded tiles, a trip count
read from another block index), on small grids or before sm_90a; the results do not change
(on the GPU against torch, ragged sizes)."""

from __future__ import annotations

import math

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.transform.analysis.numeric import eval_index
from tilelang.transform.pass_config import PassConfigKey

from transform_helpers import SM80, SM90, requires_gpu, run_passes

BLOCK = 64


def flash(batch, heads, seq_len, dim=64, causal=True, swizzle=None, stages=2, trips=None,
          variant=None):
    """FlashAttention forward written the way the reference's examples write it; `trips`
    "by_head" makes the key-tile count depend on the head index too; `variant` "gathered"
    reads each K tile at a position from `Idx`, "atomic" also adds the row sums into `Total`
    atomically."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    shape = [batch, heads, seq_len, dim]
    n_k = -(-seq_len // BLOCK)

    @T.prim_func
    def main(Q: T.Tensor(shape, "float16"), K: T.Tensor(shape, "float16"),
             V: T.Tensor(shape, "float16"), Output: T.Tensor(shape, "float16"),
             Idx: T.Tensor((n_k,), "int32"), Total: T.Tensor((BLOCK,), "float32")):
        with T.Kernel(T.ceildiv(seq_len, BLOCK), heads, batch, threads=256) as (bx, by, bz):
            if swizzle is not None:
                T.use_swizzle(panel_size=max(swizzle, 1), enable=swizzle > 0)
            Q_s = T.alloc_shared([BLOCK, dim], "float16")
            K_s = T.alloc_shared([BLOCK, dim], "float16")
            V_s = T.alloc_shared([BLOCK, dim], "float16")
            acc_s = T.alloc_fragment([BLOCK, BLOCK], "float32")
            acc_s_cast = T.alloc_fragment([BLOCK, BLOCK], "float16")
            acc_o = T.alloc_fragment([BLOCK, dim], "float32")
            m = T.alloc_fragment([BLOCK], "float32")
            m_prev = T.alloc_fragment([BLOCK], "float32")
            rescale = T.alloc_fragment([BLOCK], "float32")
            row_sum = T.alloc_fragment([BLOCK], "float32")
            l = T.alloc_fragment([BLOCK], "float32")
            T.copy(Q[bz, by, bx * BLOCK:(bx + 1) * BLOCK, :], Q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float32"))
            n = (T.min(T.ceildiv(seq_len, BLOCK), bx + 1) if causal
                 else T.ceildiv(seq_len, BLOCK))
            if trips == "by_head":
                n = T.min(n, by + 1)
            for k in T.Pipelined(n, num_stages=stages):
                if variant == "gathered":  # the native sparse attention's form
                    start = Idx[k] * BLOCK
                    T.copy(K[bz, by, start:start + BLOCK, :], K_s)
                else:
                    T.copy(K[bz, by, k * BLOCK:(k + 1) * BLOCK, :], K_s)
                for i, j in T.Parallel(BLOCK, BLOCK):
                    acc_s[i, j] = T.if_then_else(
                        (bx * BLOCK + i >= k * BLOCK + j) if causal else
                        (k * BLOCK + j < seq_len), 0, -T.infinity("float32"))
                T.gemm(Q_s, K_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(BLOCK):
                    rescale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(BLOCK, dim):
                    acc_o[i, j] *= rescale[i]
                for i, j in T.Parallel(BLOCK, BLOCK):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(BLOCK):
                    l[i] = l[i] * rescale[i] + row_sum[i]
                T.copy(acc_s, acc_s_cast)
                T.copy(V[bz, by, k * BLOCK:(k + 1) * BLOCK, :], V_s)
                T.gemm(acc_s_cast, V_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(BLOCK, dim):
                acc_o[i, j] /= l[i]
            if variant == "atomic":
                T.atomic_add(Total, l)
            T.copy(acc_o, Output[bz, by, bx * BLOCK:(bx + 1) * BLOCK, :])
    return main


def gated(M, N, K):
    """Two gemms of loaded tiles in one loop (a gated MLP's gate and up projections)."""
    @T.prim_func
    def main(X: T.Tensor((M, K), "float16"), Wg: T.Tensor((N, K), "float16"),
             Wu: T.Tensor((N, K), "float16"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=256) as (bx, by):
            X_s = T.alloc_shared((64, 64), "float16")
            G_s = T.alloc_shared((64, 64), "float16")
            U_s = T.alloc_shared((64, 64), "float16")
            g = T.alloc_fragment((64, 64), "float32")
            u = T.alloc_fragment((64, 64), "float32")
            T.clear(g)
            T.clear(u)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=2):
                T.copy(X[by * 64, k * 64], X_s)
                T.copy(Wg[bx * 64, k * 64], G_s)
                T.copy(Wu[bx * 64, k * 64], U_s)
                T.gemm(X_s, G_s, g, transpose_B=True)
                T.gemm(X_s, U_s, u, transpose_B=True)
            for i, j in T.Parallel(64, 64):
                g[i, j] = g[i, j] * u[i, j]
            T.copy(g, Y[by * 64, bx * 64])
    return main


def _notes(f, target=SM90, configs=None):
    k, ctx = run_passes(f, "persistent_grid", target, configs)
    return k, [n for n in ctx.notes if n.startswith("persistent:")]


def _launch(k, sms):
    """The persistent loop, and the names bound at a launch on a GPU of `sms` SMs: the
    blocks launched, and `workers` (gridDim.x) bound to it."""
    let_w = k.body
    assert isinstance(let_w, ir.LetStmt) and let_w.value.op == "num_blocks"
    blocks = int(eval_index(k.grid[0], {ir.DEVICE_SM_COUNT: sms}))
    loop = let_w.body
    assert isinstance(loop, ir.For) and loop.kind == "serial"
    return loop, blocks, {let_w.var: blocks}


def _blocks_visited(k, sms):
    """(bx, by, bz) of every (SM, round) of the persistent loop on a GPU of `sms` SMs,
    evaluated from its IR."""
    (bid,) = k.block_vars
    loop, blocks, launch = _launch(k, sms)
    let_p = loop.body
    guard = let_p.body
    assert isinstance(let_p, ir.LetStmt) and isinstance(guard, ir.If)
    lets, s = [], guard.then_body
    while isinstance(s, ir.LetStmt) and s.var.name in ("bx", "by", "bz"):
        lets.append(s)
        s = s.body
    seen = []
    for w in range(blocks):
        for t in range(int(eval_index(loop.extent, launch))):
            env = {**launch, bid: w, loop.var: t}
            env[let_p.var] = eval_index(let_p.value, env)
            if eval_index(guard.cond, env):
                for let in lets:
                    env[let.var] = eval_index(let.value, env)
                seen.append(tuple(int(env[let.var]) for let in lets))
    return seen


@pytest.mark.parametrize("batch,heads,seq_len,causal,sms", [
    (2, 40, 1000, True, 132), (1, 33, 2048, True, 114), (3, 24, 640, False, 78),
    (1, 40, 1000, True, 2000)])
def test_every_block_of_the_old_grid_runs_once(batch, heads, seq_len, causal, sms):
    """On a GPU of any SM count (the grid is sized at the launch), more SMs than blocks
    included."""
    k, notes = _notes(flash(batch, heads, seq_len, causal=causal))
    assert notes
    n_q = math.ceil(seq_len / BLOCK)
    seen = _blocks_visited(k, sms)
    assert sorted(seen) == sorted((x, y, z) for x in range(n_q) for y in range(heads)
                                  for z in range(batch))


@pytest.mark.parametrize("sms,spread", [(132, 1.02), (114, 1.06), (108, 1.03)])
def test_the_snake_evens_out_causal_work(sms, spread):
    """Each SM's key tiles (query block x visits x + 1) within 2% of the average on an H200's
    132 SMs (straight rounds: 12%), within a few % on other counts (the last, partial round's
    tiles fall on SMs the snake loaded more or less)."""
    k, _ = _notes(flash(8, 32, 2048))
    (bid,) = k.block_vars
    loop, blocks, launch = _launch(k, sms)
    assert blocks == sms
    work = [0] * sms
    for w in range(sms):
        for t in range(int(eval_index(loop.extent, launch))):
            env = {**launch, bid: w, loop.var: t}
            p = int(eval_index(loop.body.value, env))
            if p < 8 * 32 * 32:
                work[w] += p % 32 + 1
    assert max(work) <= spread * sum(work) / sms


def test_the_tile_loop_is_warp_specialised_across_tiles():
    k, ctx = run_passes(flash(2, 40, 1000), "warp_specialize", SM90)
    assert any("inside for tile_round" in n for n in ctx.notes), ctx.notes


@pytest.mark.parametrize("case", ["one_stage", "gated", "trips_by_head", "gathered", "atomic",
                                  "sm80", "no_ws", "swizzle_off", "swizzle", "small_grid"])
def test_one_block_per_tile_where_it_does_not_apply(case):
    f = {"one_stage": lambda: flash(2, 40, 1000, stages=1),
         "gathered": lambda: flash(2, 40, 1000, variant="gathered"),
         "atomic": lambda: flash(2, 40, 1000, variant="atomic"),
         "gated": lambda: gated(4096, 1024, 256),
         "trips_by_head": lambda: flash(2, 40, 1000, trips="by_head"),
         "swizzle_off": lambda: flash(2, 40, 1000, swizzle=0),
         "swizzle": lambda: flash(2, 40, 1000, swizzle=4),
         "small_grid": lambda: flash(1, 8, 1000)}.get(case, lambda: flash(2, 40, 1000))()
    target = SM80 if case == "sm80" else SM90
    configs = {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True} if case == "no_ws" else None
    k, notes = _notes(f, target, configs)
    assert not notes and len(k.grid) > 1


def _attention(q, k, v, causal):
    q, k, v = (x.double() for x in (q, k, v))
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
    return torch.softmax(s, dim=-1) @ v


@requires_gpu
@pytest.mark.parametrize("batch,heads,seq_len,causal", [
    (2, 40, 1000, True), (1, 72, 576, True), (3, 24, 640, False)])
def test_persistent_attention_matches_torch(batch, heads, seq_len, causal):
    kernel = tilelang.compile(flash(batch, heads, seq_len, causal=causal), target="cuda")
    assert "tile_round" in kernel.get_kernel_source()
    for seed in range(2):
        g = torch.Generator().manual_seed(seed)
        q, k, v = (torch.randn(batch, heads, seq_len, 64, generator=g).half()
                   for _ in range(3))
        out = torch.full_like(q, float("nan")).cuda()
        idx = torch.arange(-(-seq_len // BLOCK), dtype=torch.int32, device="cuda")
        kernel(q.cuda(), k.cuda(), v.cuda(), out, idx, torch.zeros(BLOCK, device="cuda"))
        torch.testing.assert_close(out.double().cpu(), _attention(q, k, v, causal),
                                   rtol=2e-2, atol=2e-2)
