"""FlashAttention forward with the softmax overlapping the tensor cores (FlashAttention-3 style).

    python examples/flash_attention/example_mha_fwd_pipelined.py

The same computation as example_mha_fwd.py (O = softmax(Q K^T / sqrt(d)) V, layout (batch,
seq, heads, dim), online softmax in exp2, optional causal mask), written so that on Hopper
(sm_90a) the two gemms of one key tile run while the CUDA cores do the softmax of another:

    T.Pipelined(n, num_stages=2, order=ORDER, stage=STAGE, group=statement_groups(masked))

splits the loop body into groups of statements. A group of stage 1 runs one iteration late,
and within one pass of the pipelined loop the groups run in `order`. With the groups below,
pass k of the loop does

    S(k) = Q K(k)^T          issued, runs on the tensor cores
    acc_o *= rescale(k-1)    CUDA cores, while S(k) runs
    acc_o += P(k-1) V(k-1)   issued, runs on the tensor cores
    softmax(S(k)) -> P(k)    CUDA cores, while P(k-1) V(k-1) runs

and the compiler waits for each gemm only where its result (or its register operand) is next
touched. `T.gemm(..., wg_wait=-1)` says the same thing per gemm: issue it and do not wait. The
K and V tiles come from a TMA producer warpgroup with one mbarrier ring each, so K(k+1) and
V(k) load while pass k computes. The results are those of the plain loop (the schedule is
checked to keep every dependency), and the CPU interpreter runs the plain loop.

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

# Statement groups of the loop body (indices count its top-level statements, see the comments
# in the kernel): K copy | QK^T | mask (when there is one) + softmax (7) | rescale | V copy | PV.
STAGE = [-1, 0, 0, 1, -1, 1]  # copies: -1 (the producer loads them ahead)
ORDER = [-1, 0, 3, 1, -1, 2]  # QK^T(k), rescale(k-1), PV(k-1), softmax(k)


def statement_groups(masked):
    """GROUP for a loop body with (masked) or without a mask statement after QK^T."""
    s = 2 + int(masked)  # the first softmax statement
    return [[0], [1], list(range(2, s + 7)), [s + 7], [s + 8], [s + 9]]


@tilelang.jit(out_idx=[3], pass_configs=FAST_MATH)
def flash_attention_fwd_pipelined(batch, heads, seq_len, dim, is_causal, block_M=128,
                                  block_N=128, num_stages=2, threads=256, dtype="float16",
                                  accum_dtype="float", overlap=True):
    """`overlap=False`: the same loop without the schedule (every gemm waits for itself)."""
    ragged = seq_len % block_N != 0  # the last key tile reaches past the end: mask it
    group = statement_groups(is_causal or ragged)
    schedule = dict(order=ORDER, stage=STAGE, group=group) if overlap else {}
    wg_wait = -1 if overlap else 0
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # 1/sqrt(d) * log2(e): softmax via exp2
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             Output: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            O_shared = T.alloc_shared([block_M, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
            m = T.alloc_fragment([block_M], accum_dtype)
            m_prev = T.alloc_fragment([block_M], accum_dtype)
            rescale = T.alloc_fragment([block_M], accum_dtype)
            row_sum = T.alloc_fragment([block_M], accum_dtype)
            l = T.alloc_fragment([block_M], accum_dtype)

            # causal: the longest rows first (query block qb = last - bx)
            qb = T.ceildiv(seq_len, block_M) - 1 - bx if is_causal else bx
            T.copy(Q[bz, qb * block_M:(qb + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum_dtype))

            n_tiles = T.ceildiv(seq_len, block_N)
            if is_causal:
                n_tiles = T.min(n_tiles, T.ceildiv((qb + 1) * block_M, block_N))

            for k in T.Pipelined(n_tiles, num_stages=num_stages, **schedule):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_shared)  # 0
                # 1: the scores overwrite acc_s (the wgmma starts from zero: no register is
                # cleared or read first)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullRow, wg_wait=wg_wait)
                # 2 (causal or ragged only): -inf where a key is masked; causal masking only on
                # tiles that reach past the diagonal, the key-range mask only on the last tile
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

                # online softmax of this tile (7 statements); P(k) goes to acc_s_cast last,
                # once the previous P V gemm (which reads acc_s_cast) is done with it
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    rescale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * rescale[i] + row_sum[i]
                T.copy(acc_s, acc_s_cast)

                for i, j in T.Parallel(block_M, dim):  # rescale
                    acc_o[i, j] *= rescale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_shared)  # V copy
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow,  # PV
                       wg_wait=wg_wait)

            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            # through shared memory: whole 16-byte vectors per thread on the way out
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[bz, qb * block_M:(qb + 1) * block_M, by, :])

    return main


def ref_program(q, k, v, is_causal):
    """float64 attention in the (batch, seq, heads, dim) layout."""
    q, k, v = (x.double().transpose(1, 2) for x in (q, k, v))
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), -math.inf)
    return (torch.softmax(s, dim=-1) @ v).transpose(1, 2)


# (batch, heads, seq_len, dim, tile config)
SIZES = {
    "small": (1, 2, 200, 64, dict(block_M=64, block_N=64, threads=128)),
    "medium": (2, 4, 1000, 128, dict()),
    "bench": (8, 32, 4096, 128, dict(block_M=128, block_N=128, num_stages=2, threads=256)),
}


def check(out, ref, tol):
    assert not torch.isnan(out).any(), "NaN in the output"
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < tol, f"relative error {err:.2e} exceeds {tol:.0e}"
    return err


def programs(size="bench"):
    B, H, S, D, cfg = SIZES[size]
    return [(f"mha_fwd_pipelined_causal{int(c)}",
             flash_attention_fwd_pipelined.get_tir(B, H, S, D, c, **cfg)) for c in (False, True)]


def run(device=None, size="small"):
    """Build the kernels (non-causal and causal), check them against a float64 reference on
    fresh random inputs, and return [{name, tilelang, baseline, baseline_name, flops, error}]."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    B, H, S, D, cfg = SIZES[size]
    q, k, v = (torch.randn(B, S, H, D, device=device, dtype=torch.float16) for _ in range(3))
    # torch's fused attention wants (batch, heads, seq, dim)
    qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    cases = []
    for causal in (False, True):
        kernel = flash_attention_fwd_pipelined(B, H, S, D, causal, **cfg)
        out = kernel(q, k, v)
        # at benchmark sizes the float64 reference is computed for one sequence and two heads
        b, h = (1, 2) if size == "bench" else (B, H)
        err = check(out[:b, :, :h], ref_program(q[:b, :, :h], k[:b, :, :h], v[:b, :, :h],
                                                causal), 5e-3)
        flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
        cases.append(dict(
            name=f"mha fwd pipelined fp16 B{B} H{H} S{S} D{D}{' causal' if causal else ''}",
            tilelang=lambda kernel=kernel: kernel(q, k, v),
            baseline=lambda causal=causal: torch.nn.functional.scaled_dot_product_attention(
                qt, kt, vt, is_causal=causal),
            baseline_name="torch SDPA", flops=flops, error=err))
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
