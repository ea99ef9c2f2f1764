"""FlashAttention forward with grouped-query attention (GQA), causal or not.

    python examples/flash_attention/example_gqa_fwd.py

Q has `heads` heads; K and V have only `heads // groups` heads, and query head h attends with
key/value head h // groups. The kernel is the MHA kernel with that one change in the K and V
indexing; K/V tiles of a group are read by several blocks, which the L2 cache absorbs.
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


@tilelang.jit(out_idx=[3], pass_configs=FAST_MATH)
def flash_attention_gqa(batch, heads, seq_len, dim, groups, is_causal, block_M=64, block_N=64,
                        num_stages=1, threads=128, head_group=4,
                        dtype="float16", accum_dtype="float"):
    head_group = math.gcd(heads, head_group)  # heads per scheduling group (causal)
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e): softmax via exp2
    kv_heads = heads // groups
    ragged = seq_len % block_N != 0  # the last key tile reaches past the end: mask it
    q_shape = [batch, seq_len, heads, dim]
    kv_shape = [batch, seq_len, kv_heads, dim]

    @T.prim_func
    def main(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype),
             V: T.Tensor(kv_shape, dtype), Output: T.Tensor(q_shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
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

            if is_causal:
                # longest blocks first: within each group of `head_group` heads the blocks
                # run from the last query block (the most key tiles) down to the first, so
                # the shortest blocks of the grid come last and even out its tail, while the
                # blocks running at once share the K/V of a few heads in L2
                n_q = T.ceildiv(seq_len, block_M)
                f = by * n_q + bx
                head = f // (n_q * head_group) * head_group + f % head_group
                qb = n_q - 1 - f % (n_q * head_group) // head_group
            else:
                head, qb = by, bx
            kv_head = head // groups
            T.copy(Q[bz, qb * block_M:(qb + 1) * block_M, head, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum_dtype))

            n_tiles = T.ceildiv(seq_len, block_N)
            if is_causal:
                n_tiles = T.min(n_tiles, T.ceildiv((qb + 1) * block_M, block_N))

            for k in T.Pipelined(n_tiles, num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, kv_head, :], K_shared)
                # the scores overwrite acc_s (the wgmma starts from zero: no register is
                # cleared or read), then -inf where a key is masked: causal masking only on
                # tiles that reach past the diagonal, the key-range mask only on the last
                # tile of a ragged sequence
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullRow)
                if is_causal:
                    if (k + 1) * block_N > qb * block_M:
                        for i, j in T.Parallel(block_M, block_N):
                            acc_s[i, j] = T.if_then_else(qb * block_M + i >= k * block_N + j,
                                                         acc_s[i, j], -T.infinity(accum_dtype))
                elif ragged:
                    if k == n_tiles - 1:
                        for i, j in T.Parallel(block_M, block_N):
                            acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, acc_s[i, j],
                                                         -T.infinity(accum_dtype))

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
            T.copy(acc_o, Output[bz, qb * block_M:(qb + 1) * block_M, head, :])

    return main


def ref_program(q, k, v, is_causal):
    """float64 GQA in the (batch, seq, heads, dim) layout."""
    groups = q.shape[2] // k.shape[2]
    q = q.double().transpose(1, 2)
    k, v = (x.double().transpose(1, 2).repeat_interleave(groups, dim=1) for x in (k, v))
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), -math.inf)
    return (torch.softmax(s, dim=-1) @ v).transpose(1, 2)


def sdpa_gqa(qt, kt, vt, is_causal):
    """torch's fused attention on (batch, heads, seq, dim) tensors with fewer K/V heads."""
    F = torch.nn.functional
    try:
        return F.scaled_dot_product_attention(qt, kt, vt, is_causal=is_causal, enable_gqa=True)
    except TypeError:  # torch < 2.5: no enable_gqa
        g = qt.shape[1] // kt.shape[1]
        return F.scaled_dot_product_attention(qt, kt.repeat_interleave(g, 1),
                                              vt.repeat_interleave(g, 1), is_causal=is_causal)


# (batch, heads, seq_len, dim, groups, tile config)
SIZES = {
    "small": (1, 4, 136, 64, 2, dict()),
    "medium": (2, 8, 1000, 128, 4, dict(block_M=128, num_stages=2, threads=256)),
    # H200, fast math (sweeps/attention_examples.py, paired with SDPA): three consumer
    # warpgroups of 64 query rows, with and without the causal mask (640 / 564 TFLOP/s,
    # 1.07x / 1.05x, against 528 / 512 TFLOP/s for 128/128 with two)
    # (head dimension 64: 192/192 tiles, 1.07-1.08x / 1.05-1.06x, the output accumulator
    # being half as large; sweeps/attention_examples.py --dim 64)
    "bench": (8, 32, 4096, 128, 4, dict(block_M=192, block_N=128, num_stages=2, threads=384)),
}


def tile_config(cfg, arch="sm_90a"):
    """The tiles on `arch`: the three-warpgroup tiles (192 query rows) need Hopper's 227 KB of
    shared memory, other GPUs take 128-row tiles with two."""
    if cfg.get("block_M") == 192 and int(arch.split("_")[1].rstrip("a")) < 90:
        return dict(cfg, block_M=128, threads=256)
    return cfg


def device_arch():
    return "sm_%d%d" % torch.cuda.get_device_capability() if torch.cuda.is_available() \
        else "sm_90a"


def check(out, ref, tol):
    assert not torch.isnan(out).any(), "NaN in the output"
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < tol, f"relative error {err:.2e} exceeds {tol:.0e}"
    return err


def programs(size="bench", arch="sm_90a"):
    B, H, S, D, G, cfg = SIZES[size]
    return [(f"gqa_fwd_causal{int(c)}", flash_attention_gqa.get_tir(
        B, H, S, D, G, c, **tile_config(cfg, arch)))
            for c in (False, True)]


def run(device=None, size="small"):
    """Build the kernels (non-causal and causal), check them against a float64 reference on
    fresh random inputs, and return [{name, tilelang, baseline, baseline_name, flops, error}]."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    B, H, S, D, G, cfg = SIZES[size]
    q = torch.randn(B, S, H, D, device=device, dtype=torch.float16)
    k, v = (torch.randn(B, S, H // G, D, device=device, dtype=torch.float16) for _ in range(2))
    qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    cases = []
    for causal in (False, True):
        tiles = tile_config(cfg, device_arch())
        kernel = flash_attention_gqa(B, H, S, D, G, causal, **tiles)
        out = kernel(q, k, v)
        # at benchmark sizes the float64 reference is computed for one sequence and the query
        # heads of one KV head
        b, hk = (1, 1) if size == "bench" else (B, H // G)
        err = check(out[:b, :, :hk * G], ref_program(q[:b, :, :hk * G], k[:b, :, :hk],
                                                     v[:b, :, :hk], causal), 5e-3)
        flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
        cases.append(dict(
            name=f"gqa fwd fp16 B{B} H{H}/{H // G} S{S} D{D}{' causal' if causal else ''}",
            tilelang=lambda kernel=kernel: kernel(q, k, v),
            baseline=lambda causal=causal: sdpa_gqa(qt, kt, vt, causal),
            baseline_name="torch SDPA (enable_gqa)", flops=flops, error=err))
    return cases


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
