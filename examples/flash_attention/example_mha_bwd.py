"""FlashAttention backward, multi-head or grouped-query attention, causal or not.

    python examples/flash_attention/example_mha_bwd.py

Four kernels, launched by `FlashAttention.forward` and `FlashAttention.backward`, built the
way FlashAttention-2/3 builds its backward pass:

1. `flash_fwd`: the forward pass that also writes the log-sum-exp of every score row
   (`lse`, base 2 with the softmax scale folded in), so that the backward pass can rebuild the
   probabilities P = exp2(S * scale - lse) tile by tile without another softmax;
2. `bwd_preprocess`: delta_i = sum_d O[i, d] * dO[i, d] (the row term of the softmax
   gradient), and the float32 dQ accumulator zeroed;
3. `flash_bwd`: one block per (key tile, head, batch). K and V of its block_M keys stay in
   shared memory and dK, dV in registers while it walks over the query tiles (T.Pipelined:
   on Hopper a producer warpgroup streams Q, dO, lse and delta with TMA):
   P^T = exp2(K Q^T * scale - lse), dP^T = V dO^T, dV += P^T dO, dS^T = P^T * (dP^T - delta),
   dK += dS^T Q. The key tile's share dS K of dQ needs the dS^T rows of every warpgroup, so
   dS^T goes through shared memory; it is computed transposed, dQ^T = K^T dS^T, and added to
   the float32 accumulator by the TMA unit. With a causal mask, query tiles that end before
   the key tile are skipped. Keys run along M in the first four gemms and the head dimension
   in the last, so P^T and dS^T are used straight from the registers as the A operand of the
   dV and dK gemms, and the query step is only ever along N, where wgmma takes any multiple
   of 8: 128 keys (two consumer warpgroups of 64) by 80 queries, FlashAttention-3's tile for
   d = 128, which reads 7% fewer bytes of shared memory per flop than 64 queries (128
   queries for d = 64);
4. `bwd_postprocess`: dQ = accumulator / sqrt(d) in float16 (the 1/sqrt(d) factor of dS is
   applied once, to dK and dQ, rather than to every dS element).

Grouped-query attention (`groups` query heads per key/value head) changes only the
indexing: the forward pass reads key/value head h // groups, and a block of the backward
main kernel walks the query tiles of all `groups` query heads of its key/value head in one
pipelined loop, so dK and dV sum over the group in the registers and are written once.

Tensors are laid out (batch, seq, heads, dim).

Runs on the GPU when there is one, else on the CPU interpreter at a small size.
"""

import math

import torch

import tilelang
import tilelang.language as T

# exp2 as one ex2.approx.ftz instruction (FlashAttention itself is built with --use_fast_math);
# without it each exponential also rescales subnormal results: about 25% more
# instructions in the softmax.
FAST_MATH = {tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True}

LOG2E = 1.44269504


@tilelang.jit(out_idx=[3, 4], pass_configs=FAST_MATH)
def flash_fwd(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64, num_stages=1,
              threads=128, groups=1, dtype="float16", accum_dtype="float"):
    """O and lse; with `groups` > 1, query head h attends with key/value head h // groups."""
    assert heads % groups == 0, f"{heads} query heads do not split into groups of {groups}"
    scale = (1.0 / dim) ** 0.5 * LOG2E
    shape = [batch, seq_len, heads, dim]
    kv_shape = [batch, seq_len, heads // groups, dim]

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(kv_shape, dtype),
             V: T.Tensor(kv_shape, dtype), Output: T.Tensor(shape, dtype),
             lse: T.Tensor([batch, heads, seq_len], accum_dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            kv_head = by // groups if groups > 1 else by
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
            m = T.alloc_fragment([block_M], accum_dtype)
            m_prev = T.alloc_fragment([block_M], accum_dtype)
            rescale = T.alloc_fragment([block_M], accum_dtype)
            row_sum = T.alloc_fragment([block_M], accum_dtype)
            l = T.alloc_fragment([block_M], accum_dtype)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum_dtype))
            n_tiles = T.ceildiv(seq_len, block_N)
            if is_causal:
                n_tiles = T.min(n_tiles, T.ceildiv((bx + 1) * block_M, block_N))
            for k in T.Pipelined(n_tiles, num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, kv_head, :], K_shared)
                for i, j in T.Parallel(block_M, block_N):
                    if is_causal:
                        visible = bx * block_M + i >= k * block_N + j
                    else:
                        visible = k * block_N + j < seq_len
                    acc_s[i, j] = T.if_then_else(visible, 0, -T.infinity(accum_dtype))
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    rescale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * rescale[i] + row_sum[i]
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= rescale[i]
                T.copy(acc_s, acc_s_cast)
                T.copy(V[bz, k * block_N:(k + 1) * block_N, kv_head, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])
            for i in T.Parallel(block_M):
                l[i] = T.log2(l[i]) + m[i] * scale
            T.copy(l, lse[bz, by, bx * block_M:(bx + 1) * block_M])

    return main


@tilelang.jit(out_idx=[2, 3], pass_configs=FAST_MATH)
def bwd_preprocess(batch, heads, seq_len, dim, block=64, dtype="float16", accum_dtype="float"):
    """Delta[b, h, i] = sum_d O[b, i, h, d] * dO[b, i, h, d], and the float32 dQ accumulator
    zeroed (the main kernel adds into it)."""
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def main(O: T.Tensor(shape, dtype), dO: T.Tensor(shape, dtype),
             Delta: T.Tensor([batch, heads, seq_len], accum_dtype),
             dQ_accum: T.Tensor(shape, accum_dtype)):
        with T.Kernel(T.ceildiv(seq_len, block), heads, batch, threads=128) as (bx, by, bz):
            o = T.alloc_fragment([block, dim], accum_dtype)
            do = T.alloc_fragment([block, dim], accum_dtype)
            delta = T.alloc_fragment([block], accum_dtype)
            T.copy(O[bz, bx * block:(bx + 1) * block, by, :], o)
            T.copy(dO[bz, bx * block:(bx + 1) * block, by, :], do)
            for i, j in T.Parallel(block, dim):
                o[i, j] = o[i, j] * do[i, j]
            T.reduce_sum(o, delta, dim=1)
            T.copy(delta, Delta[bz, by, bx * block:(bx + 1) * block])
            T.clear(do)
            T.copy(do, dQ_accum[bz, bx * block:(bx + 1) * block, by, :])

    return main


@tilelang.jit(pass_configs=FAST_MATH)
def flash_bwd(batch, heads, seq_len, dim, is_causal, block_M=128, block_N=None, num_stages=2,
              threads=256, dq_mode="tma", overlap=True, dq_transposed=True, groups=1,
              dtype="float16", accum_dtype="float"):
    """dK, dV (written) and dQ * sqrt(d) (added into a zeroed float32 accumulator) of one key
    tile per block.

    block_N: query rows per step; by default 80 (FlashAttention-3's tile for dim = 128), and
    128 for dim <= 64, where dK and dV take half the registers (H200, B8 H32 S4096 D64:
    1.03-1.05x SDPA against 0.84-0.85x at 80; benchmarks/sweeps/mha_bwd.py --dim 64).
    groups: query heads per key/value head (grouped-query attention). A block then walks the
    query tiles of each of its key/value head's query heads in turn, one pipelined loop, and
    its dK and dV sum over all of them in the registers.

    dq_mode: how the key tile's share of dQ reaches the float32 accumulator. "atomic2": the
    gemm accumulator's column pairs with 2-wide float atomics, straight from the registers;
    "shared": staged in shared memory and added with 4-wide atomics along whole rows (one more
    barrier); "tma": staged in shared memory and added by the TMA unit
    (`T.atomic_add(..., use_tma=True)`, one thread issues it; element-wise atomics where TMA
    is not available); "atomic": element by element.
    overlap: leave the dV and dK gemms in flight (wgmma `wg_wait=1`) while the next gemm is
    issued, instead of waiting for each gemm (sm_90a; elsewhere the gemms are synchronous).
    dq_transposed: compute dQ^T = K^T dS^T (head dimension along M) and store it transposed
    into the staging tile ("tma" and "shared" only); otherwise dQ = dS K with the queries
    along M, which on sm_90a needs block_N to be a multiple of 64. At dim = 64 the
    transposed gemm has one warpgroup's rows, so two warpgroups split its columns: 128 of
    them into whole swizzle atoms, but 80 not (that gemm then runs on mma.sync)."""
    assert heads % groups == 0, f"{heads} query heads do not split into groups of {groups}"
    if block_N is None:
        block_N = 128 if dim <= 64 else 80
    assert not dq_transposed or dq_mode in ("shared", "tma"), \
        "dq_transposed stages dQ in shared memory: dq_mode 'shared' or 'tma'"
    if dq_mode == "shared":
        assert block_N * dim // 4 % threads == 0, "dQ tile must split into float4s per thread"
    sm_scale = (1.0 / dim) ** 0.5
    scale = sm_scale * LOG2E
    shape = [batch, seq_len, heads, dim]
    kv_shape = [batch, seq_len, heads // groups, dim]

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(kv_shape, dtype),
             V: T.Tensor(kv_shape, dtype), dO: T.Tensor(shape, dtype),
             lse: T.Tensor([batch, heads, seq_len], accum_dtype),
             Delta: T.Tensor([batch, heads, seq_len], accum_dtype),
             dQ: T.Tensor(shape, accum_dtype), dK: T.Tensor(kv_shape, dtype),
             dV: T.Tensor(kv_shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads // groups, batch,
                      threads=threads) as (bx, by, bz):
            K_shared = T.alloc_shared([block_M, dim], dtype)
            V_shared = T.alloc_shared([block_M, dim], dtype)
            q = T.alloc_shared([block_N, dim], dtype)
            do = T.alloc_shared([block_N, dim], dtype)
            lse_shared = T.alloc_shared([block_N], accum_dtype)
            delta = T.alloc_shared([block_N], accum_dtype)
            dsT_shared = T.alloc_shared([block_M, block_N], dtype)
            qkT = T.alloc_fragment([block_M, block_N], accum_dtype)
            dpT = T.alloc_fragment([block_M, block_N], accum_dtype)
            pT_cast = T.alloc_fragment([block_M, block_N], dtype)
            dsT_cast = T.alloc_fragment([block_M, block_N], dtype)
            dv = T.alloc_fragment([block_M, dim], accum_dtype)
            dk = T.alloc_fragment([block_M, dim], accum_dtype)
            if dq_transposed:
                dqT = T.alloc_fragment([dim, block_N], accum_dtype)
            else:
                dq = T.alloc_fragment([block_N, dim], accum_dtype)
            if dq_mode in ("shared", "tma"):
                dq_shared = T.alloc_shared([block_N, dim], accum_dtype)
                # rows 512 bytes apart would put a warp's stores into the same banks
                T.annotate_layout({dq_shared: tilelang.layout.make_swizzled_layout(dq_shared)})

            tx = T.get_thread_binding()
            T.copy(K[bz, bx * block_M:(bx + 1) * block_M, by, :], K_shared)
            T.copy(V[bz, bx * block_M:(bx + 1) * block_M, by, :], V_shared)
            T.clear(dv)
            T.clear(dk)
            # with a causal mask, query tiles that end before this key tile see none of it
            first = T.floordiv(bx * block_M, block_N) if is_causal else 0
            q_tiles = T.ceildiv(seq_len, block_N)
            if groups == 1:
                steps = T.Pipelined(first, q_tiles, num_stages=num_stages)
            else:  # the query tiles of each query head of the group in turn
                steps = T.Pipelined(groups * (q_tiles - first), num_stages=num_stages)
            for t in steps:
                if groups == 1:
                    h, k = by, t
                else:
                    h = by * groups + t // (q_tiles - first)  # query head
                    k = first + t % (q_tiles - first)  # its query tile
                T.copy(Q[bz, k * block_N:(k + 1) * block_N, h, :], q)
                T.copy(dO[bz, k * block_N:(k + 1) * block_N, h, :], do)
                T.copy(lse[bz, h, k * block_N:(k + 1) * block_N], lse_shared)
                T.copy(Delta[bz, h, k * block_N:(k + 1) * block_N], delta)
                # S^T = K Q^T and dP^T = V dO^T: keys along M, so P^T and dS^T stay in the
                # registers as the A operands of dV += P^T dO and dK += dS^T Q. P^T is
                # rounded to float16 before dP^T is computed, which keeps only one float32
                # score tile alive next to dK and dV (register pressure).
                T.gemm(K_shared, q, qkT, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullRow)
                # causal: only query tiles that start before this key tile ends cross the
                # diagonal and need the mask
                if is_causal:
                    if k * block_N < (bx + 1) * block_M:
                        for i, j in T.Parallel(block_M, block_N):
                            pT_cast[i, j] = T.if_then_else(
                                bx * block_M + i <= k * block_N + j,
                                T.exp2(qkT[i, j] * scale - lse_shared[j]), 0)
                    else:
                        for i, j in T.Parallel(block_M, block_N):
                            pT_cast[i, j] = T.exp2(qkT[i, j] * scale - lse_shared[j])
                else:
                    for i, j in T.Parallel(block_M, block_N):
                        pT_cast[i, j] = T.exp2(qkT[i, j] * scale - lse_shared[j])
                if overlap:
                    # dV += P^T dO stays in flight while dP^T is computed (both wait there)
                    T.gemm(pT_cast, do, dv, policy=T.GemmWarpPolicy.FullRow, wg_wait=1)
                    T.gemm(V_shared, do, dpT, transpose_B=True, clear_accum=True,
                           policy=T.GemmWarpPolicy.FullRow)
                else:
                    T.gemm(V_shared, do, dpT, transpose_B=True, clear_accum=True,
                           policy=T.GemmWarpPolicy.FullRow)
                    T.gemm(pT_cast, do, dv, policy=T.GemmWarpPolicy.FullRow)
                # dS^T without the 1/sqrt(d) factor: it is applied once to dK and dQ
                for i, j in T.Parallel(block_M, block_N):
                    dsT_cast[i, j] = pT_cast[i, j] * (dpT[i, j] - delta[j])
                # dQ (this key tile's share) = dS K needs the dS^T rows of every warpgroup:
                # through shared memory, stored before dK's gemm reads dS^T from registers
                T.copy(dsT_cast, dsT_shared)
                # with `overlap`, dK += dS^T Q runs across the barrier that publishes dS^T
                T.gemm(dsT_cast, q, dk, policy=T.GemmWarpPolicy.FullRow,
                       wg_wait=1 if overlap else 0)
                if dq_transposed:
                    # dQ^T = K^T dS^T: the head dimension along M (64 rows per warpgroup)
                    # and the queries along N, so block_N need not be a multiple of 64
                    T.gemm(K_shared, dsT_shared, dqT, transpose_A=True, clear_accum=True)
                    for i, j in T.Parallel(dim, block_N):
                        dq_shared[j, i] = dqT[i, j]
                else:
                    T.gemm(dsT_shared, K_shared, dq, transpose_A=True, clear_accum=True)
                    if dq_mode in ("shared", "tma"):
                        T.copy(dq, dq_shared)
                if dq_mode == "tma":
                    T.atomic_add(dQ[bz, k * block_N:(k + 1) * block_N, h, :], dq_shared,
                                 use_tma=True)
                elif dq_mode == "shared":
                    # lane l of a warp adds columns 4l..4l+3: one instruction adds whole
                    # 512-byte rows (rows past seq_len are skipped: such atomics do nothing)
                    for r in T.unroll(block_N * dim // 4 // threads):
                        i = (r * threads + tx) // (dim // 4)
                        j = (r * threads + tx) % (dim // 4)
                        T.atomic_addx4(dQ[bz, k * block_N + i, h, j * 4], dq_shared[i, j * 4])
                elif dq_mode == "atomic2":
                    # the accumulator holds column pairs (2j, 2j + 1) in consecutive registers
                    for i, j in T.Parallel(block_N, dim):
                        if j % 2 == 0:
                            T.atomic_addx2(dQ[bz, k * block_N + i, h, j], dq[i, j])
                else:
                    for i, j in T.Parallel(block_N, dim):
                        T.atomic_add(dQ[bz, k * block_N + i, h, j], dq[i, j])

            for i, j in T.Parallel(block_M, dim):
                dk[i, j] *= sm_scale
            T.copy(dv, dV[bz, bx * block_M:(bx + 1) * block_M, by, :])
            T.copy(dk, dK[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return main


@tilelang.jit(out_idx=[1], pass_configs=FAST_MATH)
def bwd_postprocess(batch, heads, seq_len, dim, block=64, dtype="float16", accum_dtype="float"):
    """dQ = dQ_accum / sqrt(d) in the input precision."""
    sm_scale = (1.0 / dim) ** 0.5
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def main(dQ_accum: T.Tensor(shape, accum_dtype), dQ: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block), heads, batch, threads=128) as (bx, by, bz):
            acc = T.alloc_fragment([block, dim], accum_dtype)
            out = T.alloc_fragment([block, dim], dtype)
            T.copy(dQ_accum[bz, bx * block:(bx + 1) * block, by, :], acc)
            for i, j in T.Parallel(block, dim):
                out[i, j] = acc[i, j] * sm_scale
            T.copy(out, dQ[bz, bx * block:(bx + 1) * block, by, :])

    return main


class FlashAttention:
    """The kernels for one problem shape, with torch-style forward/backward calls."""

    def __init__(self, batch, heads, seq_len, dim, is_causal, fwd_cfg=None, bwd_cfg=None,
                 groups=1):
        args = (batch, heads, seq_len, dim)
        self.fwd = flash_fwd(*args, is_causal, groups=groups, **(fwd_cfg or {}))
        self.prep = bwd_preprocess(*args)
        self.bwd = flash_bwd(*args, is_causal, groups=groups, **(bwd_cfg or {}))
        self.post = bwd_postprocess(*args)

    def forward(self, q, k, v):
        return self.fwd(q, k, v)  # (O, lse)

    def backward(self, q, k, v, o, lse, do):
        delta, dq_accum = self.prep(o, do)
        dk, dv = torch.empty_like(k), torch.empty_like(v)
        self.bwd(q, k, v, do, lse, delta, dq_accum, dk, dv)
        return self.post(dq_accum), dk, dv


def ref_grads(q, k, v, do, is_causal, groups=1):
    """float64 autograd through plain attention, (batch, seq, heads, dim) layout; K and V
    have heads // groups heads, each shared by `groups` query heads."""
    q, k, v = (x.detach().double().requires_grad_() for x in (q, k, v))
    qt, kt, vt = (x.repeat_interleave(groups, dim=2).transpose(1, 2) if x is not q
                  else x.transpose(1, 2) for x in (q, k, v))
    s = qt @ kt.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), -math.inf)
    o = (torch.softmax(s, dim=-1) @ vt).transpose(1, 2)
    return (o.detach(), *torch.autograd.grad(o, (q, k, v), do.double()))


# (batch, heads, seq_len, dim, forward tiles, backward tiles (Hopper))
SIZES = {
    "small": (1, 2, 200, 64, dict(), dict()),
    "medium": (2, 4, 1000, 128, dict(block_M=128, num_stages=2, threads=256), dict()),
    "bench": (8, 32, 4096, 128, dict(block_M=128, num_stages=2, threads=256), dict()),
}
# query heads per key/value head in the grouped-query cases
GQA_GROUPS = {"small": 2, "medium": 2, "bench": 4}


def fit_config(cfg, arch):
    """Before Hopper there are 164 KB of shared memory per block, not 227 KB: 32-row query
    tiles; and no TMA: dQ goes out with 2-wide atomics from the registers."""
    if int(arch.split("_")[1].rstrip("a")) < 90:
        cfg = dict(cfg, block_N=32, dq_transposed=False)
        if cfg.get("dq_mode", "tma") == "tma":
            cfg["dq_mode"] = "atomic2"
    return cfg


def check(out, ref, tol):
    assert not torch.isnan(out).any(), "NaN in the output"
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < tol, f"relative error {err:.2e} exceeds {tol:.0e}"
    return err


def programs(size="bench", arch="sm_90a"):
    B, H, S, D, fcfg, bcfg = SIZES[size]
    bcfg = fit_config(bcfg, arch)
    out = [("bwd_preprocess", bwd_preprocess.get_tir(B, H, S, D)),
           ("bwd_postprocess", bwd_postprocess.get_tir(B, H, S, D))]
    for c in (False, True):
        out.append((f"fwd_lse_causal{int(c)}", flash_fwd.get_tir(B, H, S, D, c, **fcfg)))
        out.append((f"bwd_causal{int(c)}", flash_bwd.get_tir(B, H, S, D, c, **bcfg)))
        out.append((f"bwd_gqa_causal{int(c)}", flash_bwd.get_tir(
            B, H, S, D, c, groups=GQA_GROUPS[size], **bcfg)))
    return out


def run(device=None, size="small"):
    """Build the kernels (multi-head and grouped-query, non-causal and causal), check O, dQ,
    dK, dV against float64 autograd on fresh random inputs, and return one backward case each:
    [{name, tilelang, baseline, baseline_name, flops, error}]."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    B, H, S, D, fcfg, bcfg = SIZES[size]
    if device == "cuda":
        bcfg = fit_config(bcfg, "sm_%d%d" % torch.cuda.get_device_capability())
    cases = []
    for groups in (1, GQA_GROUPS[size]):
        q, do = (torch.randn(B, S, H, D, device=device, dtype=torch.float16) for _ in range(2))
        k, v = (torch.randn(B, S, H // groups, D, device=device, dtype=torch.float16)
                for _ in range(2))
        for causal in (False, True):
            cases.append(_case(q, k, v, do, causal, groups, fcfg, bcfg, size == "bench"))
    return cases


def _case(q, k, v, do, causal, groups, fcfg, bcfg, bench):
    B, S, H, D = q.shape
    attn = FlashAttention(B, H, S, D, causal, fcfg, bcfg, groups)
    o, lse = attn.forward(q, k, v)
    grads = attn.backward(q, k, v, o, lse, do)
    # at benchmark sizes the float64 reference is computed for one sequence and two heads
    # (grouped: the query heads of one key/value head)
    b, kv = (1, 2 if groups == 1 else 1) if bench else (B, H // groups)
    qs = (slice(None, b), slice(None), slice(None, kv * groups))
    kvs = (slice(None, b), slice(None), slice(None, kv))
    refs = ref_grads(q[qs], k[kvs], v[kvs], do[qs], causal, groups)
    err = max(check(x, r, tol) for x, r, tol in zip(
        (o[qs], grads[0][qs], grads[1][kvs], grads[2][kvs]), refs, (5e-3, 1e-2, 1e-2, 1e-2)))

    # baseline: the backward pass of torch's fused attention (its forward done once here)
    qt, kt, vt = (x.transpose(1, 2).contiguous().requires_grad_() for x in (q, k, v))
    ot = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal,
                                                          enable_gqa=groups > 1)
    dot = do.transpose(1, 2).contiguous()
    baseline = (lambda: torch.autograd.grad(ot, (qt, kt, vt), dot, retain_graph=True))
    flops = 2.5 * 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)  # 5 GEMMs
    heads = f"H{H}" if groups == 1 else f"H{H}/{H // groups}"
    return dict(
        name=f"{'mha' if groups == 1 else 'gqa'} bwd fp16 B{B} {heads} S{S} D{D}"
             f"{' causal' if causal else ''}",
        tilelang=lambda: attn.backward(q, k, v, o, lse, do),
        baseline=baseline, baseline_name="torch SDPA backward" + (" (enable_gqa)" if groups > 1
                                                                 else ""),
        flops=flops, error=err)


def main():
    gpu = torch.cuda.is_available()
    for case in run("cuda" if gpu else "cpu", "bench" if gpu else "small"):
        line = f"{case['name']}: relative error {case['error']:.1e}"
        if gpu:
            from tilelang.profiler import do_bench

            ms = do_bench(case["tilelang"], return_mode="median")
            ref_ms = do_bench(case["baseline"], return_mode="median")
            line += (f", {ms:.4f} ms ({case['flops'] / ms * 1e-9:.1f} TFLOP/s), "
                     f"{case['baseline_name']} {ref_ms:.4f} ms, speedup {ref_ms / ms:.2f}x")
        print(line)


if __name__ == "__main__":
    main()
