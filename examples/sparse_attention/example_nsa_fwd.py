"""Native sparse attention (NSA), forward pass of the selected-blocks branch.

    python examples/sparse_attention/example_nsa_fwd.py

In NSA every query token t attends, per key/value head, only to a few selected blocks of
`block_size` keys (chosen upstream, e.g. by the compressed-attention branch), causally: keys
after t are masked. `BlockIndices[b, t, kv_head, :]` lists the selected block numbers; -1
marks an unused slot. One thread block handles one query token and one KV head; the `groups`
query heads that share the KV head are the rows of the score tile, so every K/V block loaded
from memory serves all of them. The loop over the selected slots is an ordinary online
softmax; a slot that is unused or starts after t is skipped with an `if`.

Q, Output are (batch, seq, heads, dim); K, V are (batch, seq, kv_heads, dim).

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


@tilelang.jit(out_idx=[4], pass_configs=FAST_MATH)
def nsa_fwd(batch, heads, kv_heads, seq_len, dim, block_size, selected_blocks, num_stages=2,
            threads=128, dtype="float16", accum_dtype="float"):
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e): softmax via exp2
    groups = heads // kv_heads
    block_H = max(16, groups)  # rows of the score tile (tensor-core tiles are 16 rows tall)
    BS = block_size

    @T.prim_func
    def main(Q: T.Tensor([batch, seq_len, heads, dim], dtype),
             K: T.Tensor([batch, seq_len, kv_heads, dim], dtype),
             V: T.Tensor([batch, seq_len, kv_heads, dim], dtype),
             BlockIndices: T.Tensor([batch, seq_len, kv_heads, selected_blocks], "int32"),
             Output: T.Tensor([batch, seq_len, heads, dim], dtype)):
        with T.Kernel(seq_len, batch * kv_heads, threads=threads) as (bx, by):
            Q_shared = T.alloc_shared([block_H, dim], dtype)
            K_shared = T.alloc_shared([BS, dim], dtype)
            V_shared = T.alloc_shared([BS, dim], dtype)
            P_shared = T.alloc_shared([block_H, BS], dtype)
            acc_s = T.alloc_fragment([block_H, BS], accum_dtype)
            acc_o = T.alloc_fragment([block_H, dim], accum_dtype)
            m = T.alloc_fragment([block_H], accum_dtype)
            m_prev = T.alloc_fragment([block_H], accum_dtype)
            rescale = T.alloc_fragment([block_H], accum_dtype)
            row_sum = T.alloc_fragment([block_H], accum_dtype)
            l = T.alloc_fragment([block_H], accum_dtype)

            t = bx
            b = by // kv_heads
            hk = by % kv_heads

            T.copy(Q[b, t, hk * groups:(hk + 1) * groups, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum_dtype))

            for s in T.Pipelined(selected_blocks, num_stages=num_stages):
                start = BlockIndices[b, t, hk, s] * BS
                if start >= 0 and start <= t:
                    T.copy(K[b, start:start + BS, hk, :], K_shared)
                    for i, j in T.Parallel(block_H, BS):
                        acc_s[i, j] = T.if_then_else(start + j <= t, 0, -T.infinity(accum_dtype))
                    T.gemm(Q_shared, K_shared, acc_s, transpose_B=True,
                           policy=T.GemmWarpPolicy.FullCol)

                    T.copy(m, m_prev)
                    T.reduce_max(acc_s, m, dim=1, clear=False)
                    for i in T.Parallel(block_H):
                        rescale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                    for i, j in T.Parallel(block_H, BS):
                        acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                    T.reduce_sum(acc_s, row_sum, dim=1)
                    for i in T.Parallel(block_H):
                        l[i] = l[i] * rescale[i] + row_sum[i]
                    for i, j in T.Parallel(block_H, dim):
                        acc_o[i, j] *= rescale[i]

                    T.copy(acc_s, P_shared)
                    T.copy(V[b, start:start + BS, hk, :], V_shared)
                    T.gemm(P_shared, V_shared, acc_o, policy=T.GemmWarpPolicy.FullCol)

            for i, j in T.Parallel(block_H, dim):
                if i < groups:
                    Output[b, t, hk * groups + i, j] = acc_o[i, j] / l[i]

    return main


def make_block_indices(batch, seq_len, kv_heads, selected_blocks, block_size, device):
    """Random distinct causal block choices per (batch, token, kv head); -1 pads the slots of
    early tokens that have fewer blocks to choose from. Every token gets its own block."""
    n_blocks = math.ceil(seq_len / block_size)
    t = torch.arange(seq_len, device=device).view(1, seq_len, 1, 1)
    blk = torch.arange(n_blocks, device=device).view(1, 1, 1, n_blocks)
    r = torch.rand(batch, seq_len, kv_heads, n_blocks, device=device)
    r = torch.where(blk > t // block_size, 2.0, r)          # future blocks: never chosen
    r = torch.where(blk == t // block_size, -1.0, r)         # the token's own block: always
    order = r.argsort(dim=-1)[..., :selected_blocks]
    chosen = r.gather(-1, order)
    idx = torch.where(chosen > 1.5, -1, order)
    if idx.shape[-1] < selected_blocks:
        pad = idx.new_full((*idx.shape[:-1], selected_blocks - idx.shape[-1]), -1)
        idx = torch.cat([idx, pad], dim=-1)
    return idx.to(torch.int32).contiguous()


def dense_mask(block_indices, seq_len, block_size):
    """(batch, kv_heads, seq, seq) bool: key visible to query."""
    B, S, HK, _ = block_indices.shape
    n_blocks = math.ceil(seq_len / block_size)
    sel = torch.zeros(B, S, HK, n_blocks + 1, dtype=torch.bool, device=block_indices.device)
    sel.scatter_(-1, torch.where(block_indices < 0, n_blocks, block_indices).long(), True)
    key_blk = torch.arange(seq_len, device=block_indices.device) // block_size
    mask = sel[..., key_blk]                                  # B, S, HK, S_key
    causal = torch.ones(seq_len, seq_len, dtype=torch.bool, device=mask.device).tril()
    return mask.permute(0, 2, 1, 3) & causal


def ref_program(q, k, v, block_indices, block_size, rows=slice(None)):
    """float64 attention with the NSA selection mask, for the query tokens `rows`."""
    groups = q.shape[2] // k.shape[2]
    mask = dense_mask(block_indices, q.shape[1], block_size)[:, :, rows]
    mask = mask.repeat_interleave(groups, 1)
    q = q[:, rows]
    q, k, v = (x.double().transpose(1, 2) for x in (q, k, v))
    k, v = (x.repeat_interleave(groups, 1) for x in (k, v))
    s = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(~mask, -math.inf)
    return (torch.softmax(s, dim=-1) @ v).transpose(1, 2)


# (batch, heads, kv_heads, seq_len, dim, block_size, selected_blocks, config)
SIZES = {
    # 16 x 16 score tiles: two warps, so that each owns whole 16 x 8 mma tiles
    "small": (1, 32, 2, 100, 64, 16, 3, dict(threads=64)),
    "medium": (2, 32, 2, 1000, 128, 32, 8, dict()),
    "bench": (1, 64, 4, 8192, 128, 64, 16, dict()),
}


def check(out, ref, tol):
    assert not torch.isnan(out).any(), "NaN in the output"
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < tol, f"relative error {err:.2e} exceeds {tol:.0e}"
    return err


def programs(size="bench"):
    B, H, HK, S, D, BS, NS, cfg = SIZES[size]
    return [("nsa_fwd", nsa_fwd.get_tir(B, H, HK, S, D, BS, NS, **cfg))]


def run(device=None, size="small"):
    """Build the kernel, check it against a float64 masked-attention reference on fresh random
    inputs and block choices, and return [{name, tilelang, baseline, baseline_name, flops,
    error}]."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    B, H, HK, S, D, BS, NS, cfg = SIZES[size]
    G = H // HK
    kernel = nsa_fwd(B, H, HK, S, D, BS, NS, **cfg)
    q = torch.randn(B, S, H, D, device=device, dtype=torch.float16)
    k, v = (torch.randn(B, S, HK, D, device=device, dtype=torch.float16) for _ in range(2))
    idx = make_block_indices(B, S, HK, NS, BS, device)
    out = kernel(q, k, v, idx)
    if size == "bench":  # the float64 reference for the last 256 tokens and one KV head
        rows = slice(S - 256, S)
        ref = ref_program(q[:, :, :G], k[:, :, :1], v[:, :, :1], idx[:, :, :1], BS, rows)
        err = check(out[:, rows, :G], ref, 5e-3)
    else:
        err = check(out, ref_program(q, k, v, idx, BS), 5e-3)

    # baseline: torch's fused attention with the selection as a dense mask, per KV head
    mask = dense_mask(idx, S, BS).reshape(B * HK, 1, S, S)
    qt = q.view(B, S, HK, G, D).permute(0, 2, 3, 1, 4).reshape(B * HK, G, S, D)
    kt, vt = (x.permute(0, 2, 1, 3).reshape(B * HK, 1, S, D).expand(-1, G, -1, -1).contiguous()
              for x in (k, v))

    def baseline():
        return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask)

    visible_blocks = int((idx >= 0).sum())
    flops = 4.0 * visible_blocks * G * BS * D
    return [dict(name=f"nsa fwd fp16 B{B} H{H}/{HK} S{S} D{D} block {BS} x{NS}",
                 tilelang=lambda: kernel(q, k, v, idx), baseline=baseline,
                 baseline_name="torch SDPA + dense mask", flops=flops, error=err)]


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
