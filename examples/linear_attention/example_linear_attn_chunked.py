"""Chunked causal linear attention (forward).

    python examples/linear_attention/example_linear_attn_chunked.py

O_t = scale * sum_{s <= t} (q_t . k_s) v_s: attention without the softmax, as in linear
transformers / RetNet without decay. Written as matrices, O = scale * tril(Q K^T) V costs
O(S^2); the chunked form costs O(S): the sequence is cut into chunks of C rows, and a state
H = sum over earlier chunks of K_c^T V_c (dim_k x block_V) is carried in registers. For
chunk c,

    O_c = scale * (tril(Q_c K_c^T) V_c + Q_c H),    then    H += K_c^T V_c.

One block owns one (batch, head, block of value columns) and walks the chunks in order; the
state is copied to shared memory (float16) before each chunk to serve as a GEMM operand.
Tensors are laid out (batch, seq, heads, dim).

Runs on the GPU when there is one, else on the CPU interpreter at a small size.
"""

import torch

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[3])
def linear_attention_fwd(batch, heads, seq_len, dim_k, dim_v, chunk=64, block_V=64,
                         num_stages=1, threads=128, dtype="float16", accum_dtype="float"):
    scale = dim_k ** -0.5

    @T.prim_func
    def main(Q: T.Tensor([batch, seq_len, heads, dim_k], dtype),
             K: T.Tensor([batch, seq_len, heads, dim_k], dtype),
             V: T.Tensor([batch, seq_len, heads, dim_v], dtype),
             Output: T.Tensor([batch, seq_len, heads, dim_v], dtype)):
        with T.Kernel(T.ceildiv(dim_v, block_V), heads, batch, threads=threads) as (bv, bh, bb):
            Q_shared = T.alloc_shared([chunk, dim_k], dtype)
            K_shared = T.alloc_shared([chunk, dim_k], dtype)
            V_shared = T.alloc_shared([chunk, block_V], dtype)
            S_shared = T.alloc_shared([chunk, chunk], dtype)
            H_shared = T.alloc_shared([dim_k, block_V], dtype)
            s = T.alloc_fragment([chunk, chunk], accum_dtype)
            o = T.alloc_fragment([chunk, block_V], accum_dtype)
            h = T.alloc_fragment([dim_k, block_V], accum_dtype)

            T.clear(h)
            for c in T.Pipelined(T.ceildiv(seq_len, chunk), num_stages=num_stages):
                T.copy(Q[bb, c * chunk:(c + 1) * chunk, bh, :], Q_shared)
                T.copy(K[bb, c * chunk:(c + 1) * chunk, bh, :], K_shared)
                T.copy(V[bb, c * chunk:(c + 1) * chunk, bh, bv * block_V:(bv + 1) * block_V],
                       V_shared)

                # intra-chunk part: causal scores inside the chunk
                T.clear(s)
                T.gemm(Q_shared, K_shared, s, transpose_B=True)
                for i, j in T.Parallel(chunk, chunk):
                    s[i, j] = T.if_then_else(i >= j, s[i, j], 0)
                T.copy(s, S_shared)
                T.copy(h, H_shared)  # the state of the chunks before this one

                T.clear(o)
                T.gemm(S_shared, V_shared, o)
                T.gemm(Q_shared, H_shared, o)  # inter-chunk part
                T.gemm(K_shared, V_shared, h, transpose_A=True)  # H += K_c^T V_c

                for i, j in T.Parallel(chunk, block_V):
                    o[i, j] *= scale
                T.copy(o, Output[bb, c * chunk:(c + 1) * chunk, bh,
                                 bv * block_V:(bv + 1) * block_V])

    return main


def ref_program(q, k, v):
    """float64 causal linear attention, (batch, seq, heads, dim) layout."""
    q, k, v = (x.double().transpose(1, 2) for x in (q, k, v))
    s = (q @ k.transpose(-1, -2)).tril() * q.shape[-1] ** -0.5
    return (s @ v).transpose(1, 2)


# (batch, heads, seq_len, dim_k, dim_v, config); seq_len need not be a multiple of the chunk
SIZES = {
    "small": (1, 2, 200, 64, 64, dict()),
    "medium": (2, 4, 1000, 128, 128, dict()),
    "bench": (4, 16, 8192, 128, 128, dict(num_stages=2)),
}


def check(out, ref, tol):
    assert not torch.isnan(out).any(), "NaN in the output"
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < tol, f"relative error {err:.2e} exceeds {tol:.0e}"
    return err


def programs(size="bench"):
    B, H, S, DK, DV, cfg = SIZES[size]
    return [("linear_attention_fwd", linear_attention_fwd.get_tir(B, H, S, DK, DV, **cfg))]


def run(device=None, size="small"):
    """Build the kernel, check it against a float64 reference on fresh random inputs, and return
    [{name, tilelang, baseline, baseline_name, flops, error}]."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    B, H, S, DK, DV, cfg = SIZES[size]
    kernel = linear_attention_fwd(B, H, S, DK, DV, **cfg)
    q, k = (torch.randn(B, S, H, DK, device=device, dtype=torch.float16) for _ in range(2))
    v = torch.randn(B, S, H, DV, device=device, dtype=torch.float16)
    out = kernel(q, k, v)
    # at benchmark sizes the float64 reference is computed for one sequence and two heads
    b, h = (1, 2) if size == "bench" else (B, H)
    err = check(out[:b, :, :h], ref_program(q[:b, :, :h], k[:b, :, :h], v[:b, :, :h]), 5e-3)

    qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))

    def baseline():  # the quadratic form with cuBLAS: what torch offers without a kernel
        return ((qt * DK ** -0.5) @ kt.transpose(-1, -2)).tril_() @ vt

    C = cfg.get("chunk", 64)
    flops = B * H * S * (2.0 * C * (DK + DV) + 4.0 * DK * DV)
    return [dict(name=f"chunked linear attention fp16 B{B} H{H} S{S} D{DK}",
                 tilelang=lambda: kernel(q, k, v), baseline=baseline,
                 baseline_name="torch eager (quadratic, cuBLAS)", flops=flops, error=err)]


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
