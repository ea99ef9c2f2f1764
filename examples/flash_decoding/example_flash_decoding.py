"""Flash decoding: attention of one new token per sequence against a long KV cache, with the
keys split over blocks (split-KV) and a second kernel combining the partial results.

    python examples/flash_decoding/example_flash_decoding.py

In decoding, Q has one row per (batch, head), so a FlashAttention grid over query tiles would
have only batch * heads / block_H blocks, far too few to read the KV cache at full bandwidth.
Split-KV gives each block one slice of the sequence as well:

1. `split` kernel, grid (batch, head groups, num_split): the heads sharing one K/V head (GQA)
   form the rows of the score tile; the block runs the online softmax over its slice and
   writes a partial output and its log-sum-exp (base 2) to a workspace;
2. `combine` kernel, grid (heads, batch): O = sum_s exp2(lse_s - lse) * O_s, with
   lse = log2(sum_s exp2(lse_s)).

Both kernels live in one `@T.prim_func`; the workspace is `T.alloc_global`, so the caller
just calls `kernel(q, k, v)`. Q, O are (batch, heads, dim); K, V are (batch, seq, kv_heads,
dim).

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


@tilelang.jit(out_idx=[3], pass_configs=FAST_MATH)
def flash_decoding(batch, heads, kv_heads, seq_len, dim, num_split=4, block_N=64, block_H=16,
                   num_stages=2, threads=128, dtype="float16", accum_dtype="float"):
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e): softmax via exp2
    groups = heads // kv_heads
    valid_h = min(block_H, groups)  # query heads per block (the score tile has block_H rows)
    # every slice is a whole number of key tiles, and no slice is empty
    n_tiles = T.ceildiv(seq_len, block_N)
    tiles_per_split = T.ceildiv(n_tiles, num_split)
    num_split = T.ceildiv(n_tiles, tiles_per_split)
    split_len = tiles_per_split * block_N

    @T.prim_func
    def main(Q: T.Tensor([batch, heads, dim], dtype),
             K: T.Tensor([batch, seq_len, kv_heads, dim], dtype),
             V: T.Tensor([batch, seq_len, kv_heads, dim], dtype),
             Output: T.Tensor([batch, heads, dim], dtype)):
        O_partial = T.alloc_global([batch, heads, num_split, dim], accum_dtype)
        lse_partial = T.alloc_global([batch, heads, num_split], accum_dtype)

        with T.Kernel(batch, heads // valid_h, num_split, threads=threads) as (bid, hid, sid):
            Q_shared = T.alloc_shared([block_H, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_H, block_N], accum_dtype)
            S_shared = T.alloc_shared([block_H, block_N], dtype)
            acc_o = T.alloc_fragment([block_H, dim], accum_dtype)
            m = T.alloc_fragment([block_H], accum_dtype)
            m_prev = T.alloc_fragment([block_H], accum_dtype)
            rescale = T.alloc_fragment([block_H], accum_dtype)
            row_sum = T.alloc_fragment([block_H], accum_dtype)
            l = T.alloc_fragment([block_H], accum_dtype)

            kv_head = hid * valid_h // groups
            start = sid * split_len
            # rows past valid_h hold other heads (or zeros): computed, never stored
            T.copy(Q[bid, hid * valid_h:(hid + 1) * valid_h, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum_dtype))

            for k in T.Pipelined(T.ceildiv(T.min(split_len, seq_len - start), block_N),
                                 num_stages=num_stages):
                kv0 = start + k * block_N
                T.copy(K[bid, kv0:kv0 + block_N, kv_head, :], K_shared)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.if_then_else(kv0 + j < seq_len, 0, -T.infinity(accum_dtype))
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullCol)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    rescale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(block_H):
                    l[i] = l[i] * rescale[i] + row_sum[i]
                for i, j in T.Parallel(block_H, dim):
                    acc_o[i, j] *= rescale[i]
                # P goes through shared memory: with FullCol every warp needs all its rows
                T.copy(acc_s, S_shared)
                T.copy(V[bid, kv0:kv0 + block_N, kv_head, :], V_shared)
                T.gemm(S_shared, V_shared, acc_o, policy=T.GemmWarpPolicy.FullCol)

            for i, j in T.Parallel(block_H, dim):
                if i < valid_h:
                    O_partial[bid, hid * valid_h + i, sid, j] = acc_o[i, j] / l[i]
            for i in T.Parallel(block_H):
                if i < valid_h:
                    lse_partial[bid, hid * valid_h + i, sid] = T.log2(l[i]) + m[i] * scale

        with T.Kernel(heads, batch, threads=128) as (hid, bid):
            o = T.alloc_fragment([dim], accum_dtype)
            lse_max = T.alloc_var(accum_dtype, -T.infinity(accum_dtype))
            total = T.alloc_var(accum_dtype, 0)
            for s in T.serial(num_split):
                lse_max = T.max(lse_max, lse_partial[bid, hid, s])
            for s in T.serial(num_split):
                total += T.exp2(lse_partial[bid, hid, s] - lse_max)
            T.clear(o)
            for s in T.serial(num_split):
                w = T.exp2(lse_partial[bid, hid, s] - lse_max) / total
                for j in T.Parallel(dim):
                    o[j] += O_partial[bid, hid, s, j] * w
            T.copy(o, Output[bid, hid, :])

    return main


def ref_program(q, k, v):
    """float64 decode attention: q (B, H, D), k/v (B, S, H_kv, D) -> (B, H, D)."""
    groups = q.shape[1] // k.shape[2]
    q = q.double().unsqueeze(2)                                    # B, H, 1, D
    k, v = (x.double().transpose(1, 2).repeat_interleave(groups, 1) for x in (k, v))
    p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
    return (p @ v).squeeze(2)


# (batch, heads, kv_heads, seq_len, dim, config)
SIZES = {
    "small": (2, 8, 2, 300, 64, dict(num_split=3)),
    "medium": (3, 32, 8, 5000, 128, dict(num_split=7)),
    "bench": (64, 32, 8, 8192, 128, dict(num_split=4)),
}


def check(out, ref, tol):
    assert not torch.isnan(out).any(), "NaN in the output"
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < tol, f"relative error {err:.2e} exceeds {tol:.0e}"
    return err


def programs(size="bench"):
    B, H, HK, S, D, cfg = SIZES[size]
    return [("flash_decoding", flash_decoding.get_tir(B, H, HK, S, D, **cfg))]


def run(device=None, size="small"):
    """Build the kernel, check it against a float64 reference on fresh random inputs, and return
    [{name, tilelang, baseline, baseline_name, bytes, error}]."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    B, H, HK, S, D, cfg = SIZES[size]
    kernel = flash_decoding(B, H, HK, S, D, **cfg)
    q = torch.randn(B, H, D, device=device, dtype=torch.float16)
    k, v = (torch.randn(B, S, HK, D, device=device, dtype=torch.float16) for _ in range(2))
    out = kernel(q, k, v)
    b = 2 if size == "bench" else B  # the float64 reference on a few sequences at bench size
    err = check(out[:b], ref_program(q[:b], k[:b], v[:b]), 5e-3)

    # torch's fused attention on its preferred (batch, heads, seq, dim) layout
    qt = q.unsqueeze(2)
    kt, vt = (x.transpose(1, 2).contiguous() for x in (k, v))

    def baseline():
        F = torch.nn.functional
        try:
            return F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)
        except TypeError:  # torch < 2.5
            return F.scaled_dot_product_attention(qt, kt.repeat_interleave(H // HK, 1),
                                                  vt.repeat_interleave(H // HK, 1))

    return [dict(name=f"flash decoding fp16 B{B} H{H}/{HK} S{S} D{D}",
                 tilelang=lambda: kernel(q, k, v), baseline=baseline,
                 baseline_name="torch SDPA (enable_gqa)", bytes=2.0 * B * S * HK * D * 2,
                 error=err)]


def main():
    gpu = torch.cuda.is_available()
    for case in run("cuda" if gpu else "cpu", "bench" if gpu else "small"):
        line = f"{case['name']}: relative error {case['error']:.1e}"
        if gpu:
            from tilelang.profiler import do_bench

            ms = do_bench(case["tilelang"], return_mode="median")
            ref_ms = do_bench(case["baseline"], return_mode="median")
            line += (f", {ms:.4f} ms ({case['bytes'] / ms * 1e-6:.0f} GB/s), "
                     f"{case['baseline_name']} {ref_ms:.4f} ms, speedup {ref_ms / ms:.2f}x")
        print(line)


if __name__ == "__main__":
    main()
