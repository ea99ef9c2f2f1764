"""Multi-head latent attention (MLA, DeepSeek-V2/V3) decoding.

    python examples/deepseek_mla/example_mla_decode.py

In MLA decoding all query heads attend to one shared latent KV cache: keys are the latent
vector (dim 512) concatenated with a small rotary part (pe_dim 64), and values are the latent
vector itself. So a block can take block_H heads of one sequence as the rows of its score
tile, and every K/V tile it loads serves all of them: two GEMMs build the scores
(Q @ KV^T + Q_pe @ K_pe^T), the online softmax runs on the tile, and P @ KV accumulates the
(block_H x 512) output in registers. P goes through shared memory because with the FullCol
warp split every warp needs all rows of P.

Q is (batch, heads, dim), Q_pe (batch, heads, pe_dim), KV (batch, seq, dim),
K_pe (batch, seq, pe_dim); the output is (batch, heads, dim).

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
def mla_decode(batch, heads, seq_len, dim, pe_dim, block_H=64, block_N=64, num_stages=2,
               threads=256, dtype="float16", accum_dtype="float"):
    scale = (1.0 / (dim + pe_dim)) ** 0.5 * 1.44269504  # log2(e): softmax via exp2
    assert heads % block_H == 0, "heads must be a multiple of block_H"

    @T.prim_func
    def main(Q: T.Tensor([batch, heads, dim], dtype),
             Q_pe: T.Tensor([batch, heads, pe_dim], dtype),
             KV: T.Tensor([batch, seq_len, dim], dtype),
             K_pe: T.Tensor([batch, seq_len, pe_dim], dtype),
             Output: T.Tensor([batch, heads, dim], dtype)):
        with T.Kernel(heads // block_H, batch, threads=threads) as (hid, bid):
            Q_shared = T.alloc_shared([block_H, dim], dtype)
            Q_pe_shared = T.alloc_shared([block_H, pe_dim], dtype)
            KV_shared = T.alloc_shared([block_N, dim], dtype)
            K_pe_shared = T.alloc_shared([block_N, pe_dim], dtype)
            S_shared = T.alloc_shared([block_H, block_N], dtype)
            acc_s = T.alloc_fragment([block_H, block_N], accum_dtype)
            acc_o = T.alloc_fragment([block_H, dim], accum_dtype)
            m = T.alloc_fragment([block_H], accum_dtype)
            m_prev = T.alloc_fragment([block_H], accum_dtype)
            rescale = T.alloc_fragment([block_H], accum_dtype)
            row_sum = T.alloc_fragment([block_H], accum_dtype)
            l = T.alloc_fragment([block_H], accum_dtype)

            T.copy(Q[bid, hid * block_H:(hid + 1) * block_H, :], Q_shared)
            T.copy(Q_pe[bid, hid * block_H:(hid + 1) * block_H, :], Q_pe_shared)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum_dtype))

            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=num_stages):
                T.copy(KV[bid, k * block_N:(k + 1) * block_N, :], KV_shared)
                T.copy(K_pe[bid, k * block_N:(k + 1) * block_N, :], K_pe_shared)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, 0,
                                                 -T.infinity(accum_dtype))
                T.gemm(Q_shared, KV_shared, acc_s, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullCol)
                T.gemm(Q_pe_shared, K_pe_shared, acc_s, transpose_B=True,
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

                T.copy(acc_s, S_shared)
                T.gemm(S_shared, KV_shared, acc_o, policy=T.GemmWarpPolicy.FullCol)

            for i, j in T.Parallel(block_H, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, Output[bid, hid * block_H:(hid + 1) * block_H, :])

    return main


def ref_program(q, q_pe, kv, k_pe):
    """float64 MLA decode: every head attends to the shared latent cache."""
    qf = torch.cat([q, q_pe], dim=-1).double()            # B, H, dim + pe
    kf = torch.cat([kv, k_pe], dim=-1).double()           # B, S, dim + pe
    p = torch.softmax(qf @ kf.transpose(1, 2) / math.sqrt(qf.shape[-1]), dim=-1)
    return p @ kv.double()                                # B, H, dim


# (batch, heads, seq_len, dim, pe_dim, config)
SIZES = {
    "small": (2, 32, 200, 128, 32, dict(block_H=16, block_N=32, threads=128)),
    "medium": (4, 128, 3000, 512, 64, dict()),
    "bench": (64, 128, 8192, 512, 64, dict()),
}


def check(out, ref, tol):
    assert not torch.isnan(out).any(), "NaN in the output"
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < tol, f"relative error {err:.2e} exceeds {tol:.0e}"
    return err


def fit_config(cfg, arch):
    """Two KV stages at dim 512 need ~225 KB of shared memory: Hopper has it, sm_80 does not."""
    if int(arch.split("_")[1].rstrip("a")) < 90:
        return dict(cfg, num_stages=1)
    return cfg


def programs(size="bench", arch="sm_90a"):
    B, H, S, D, P, cfg = SIZES[size]
    return [("mla_decode", mla_decode.get_tir(B, H, S, D, P, **fit_config(cfg, arch)))]


def run(device=None, size="small"):
    """Build the kernel, check it against a float64 reference on fresh random inputs, and return
    [{name, tilelang, baseline, baseline_name, flops, error}]."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    B, H, S, D, P, cfg = SIZES[size]
    if device == "cuda":
        cfg = fit_config(cfg, "sm_%d%d" % torch.cuda.get_device_capability())
    kernel = mla_decode(B, H, S, D, P, **cfg)
    q = torch.randn(B, H, D, device=device, dtype=torch.float16)
    q_pe = torch.randn(B, H, P, device=device, dtype=torch.float16)
    kv = torch.randn(B, S, D, device=device, dtype=torch.float16)
    k_pe = torch.randn(B, S, P, device=device, dtype=torch.float16)
    out = kernel(q, q_pe, kv, k_pe)
    b = 4 if size == "bench" else B  # the float64 reference on a few sequences at bench size
    err = check(out[:b], ref_program(q[:b], q_pe[:b], kv[:b], k_pe[:b]), 5e-3)

    # baseline: torch's fused attention with the heads as H query rows of a single head,
    # the cache given in the concatenated layout it needs (prepared outside the timing)
    qf = torch.cat([q, q_pe], dim=-1).unsqueeze(1)        # B, 1, H, dim + pe
    kf = torch.cat([kv, k_pe], dim=-1).unsqueeze(1)       # B, 1, S, dim + pe
    vf = kv.unsqueeze(1)

    def baseline():
        return torch.nn.functional.scaled_dot_product_attention(qf, kf, vf).squeeze(1)

    flops = 2.0 * B * H * S * (D + P) + 2.0 * B * H * S * D
    return [dict(name=f"mla decode fp16 B{B} H{H} S{S} D{D}+{P}", tilelang=lambda: kernel(
        q, q_pe, kv, k_pe), baseline=baseline, baseline_name="torch SDPA", flops=flops,
        error=err)]


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
