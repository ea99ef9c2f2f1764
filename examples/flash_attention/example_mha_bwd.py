"""FlashAttention backward (multi-head attention), causal or not.

    python examples/flash_attention/example_mha_bwd.py

Three kernels, launched by `FlashAttention.forward` and `FlashAttention.backward`:

1. `flash_fwd`: the forward pass that also writes the log-sum-exp of every score row
   (`lse`, base 2 with the softmax scale folded in), so that the backward pass can rebuild the
   probabilities P = exp2(S * scale - lse) tile by tile without another softmax;
2. `bwd_preprocess`: delta_i = sum_d O[i, d] * dO[i, d] (the row term of the softmax gradient);
3. `flash_bwd`: one block per key tile. It keeps dK and dV of its keys in registers and walks
   over the query tiles: P^T = exp2(K Q^T * scale - lse), dV += P^T dO, dP^T = V dO^T,
   dS^T = P^T * (dP^T - delta) / sqrt(d), dK += dS^T Q. The contribution dS K to dQ of every
   key tile is summed with `T.atomic_add` into a float32 dQ (zeroed first).

Tensors are laid out (batch, seq, heads, dim).

Runs on the GPU when there is one, else on the CPU interpreter at a small size.
"""

import math

import torch

import tilelang
import tilelang.language as T

LOG2E = 1.44269504


@tilelang.jit(out_idx=[3, 4])
def flash_fwd(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64, num_stages=1,
              threads=128, dtype="float16", accum_dtype="float"):
    scale = (1.0 / dim) ** 0.5 * LOG2E
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             Output: T.Tensor(shape, dtype), lse: T.Tensor([batch, heads, seq_len], accum_dtype)):
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

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum_dtype))
            n_tiles = T.ceildiv(seq_len, block_N)
            if is_causal:
                n_tiles = T.min(n_tiles, T.ceildiv((bx + 1) * block_M, block_N))
            for k in T.Pipelined(n_tiles, num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_shared)
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
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])
            for i in T.Parallel(block_M):
                l[i] = T.log2(l[i]) + m[i] * scale
            T.copy(l, lse[bz, by, bx * block_M:(bx + 1) * block_M])

    return main


@tilelang.jit(out_idx=[2])
def bwd_preprocess(batch, heads, seq_len, dim, block=64, dtype="float16", accum_dtype="float"):
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def main(O: T.Tensor(shape, dtype), dO: T.Tensor(shape, dtype),
             Delta: T.Tensor([batch, heads, seq_len], accum_dtype)):
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

    return main


@tilelang.jit
def flash_bwd(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64, num_stages=1,
              threads=128, dtype="float16", accum_dtype="float"):
    sm_scale = (1.0 / dim) ** 0.5
    scale = sm_scale * LOG2E
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             dO: T.Tensor(shape, dtype), lse: T.Tensor([batch, heads, seq_len], accum_dtype),
             Delta: T.Tensor([batch, heads, seq_len], accum_dtype),
             dQ: T.Tensor(shape, accum_dtype), dK: T.Tensor(shape, dtype),
             dV: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            K_shared = T.alloc_shared([block_M, dim], dtype)
            V_shared = T.alloc_shared([block_M, dim], dtype)
            q = T.alloc_shared([block_N, dim], dtype)
            do = T.alloc_shared([block_N, dim], dtype)
            lse_shared = T.alloc_shared([block_N], accum_dtype)
            delta = T.alloc_shared([block_N], accum_dtype)
            dsT_shared = T.alloc_shared([block_M, block_N], dtype)
            qkT = T.alloc_fragment([block_M, block_N], accum_dtype)
            dsT = T.alloc_fragment([block_M, block_N], accum_dtype)
            qkT_cast = T.alloc_fragment([block_M, block_N], dtype)
            dsT_cast = T.alloc_fragment([block_M, block_N], dtype)
            dv = T.alloc_fragment([block_M, dim], accum_dtype)
            dk = T.alloc_fragment([block_M, dim], accum_dtype)
            dq = T.alloc_fragment([block_N, dim], accum_dtype)

            T.copy(K[bz, bx * block_M:(bx + 1) * block_M, by, :], K_shared)
            T.copy(V[bz, bx * block_M:(bx + 1) * block_M, by, :], V_shared)
            T.clear(dv)
            T.clear(dk)
            # with a causal mask, query tiles that end before this key tile see none of it
            first = T.floordiv(bx * block_M, block_N) if is_causal else 0
            for k in T.Pipelined(first, T.ceildiv(seq_len, block_N), num_stages=num_stages):
                T.copy(Q[bz, k * block_N:(k + 1) * block_N, by, :], q)
                T.clear(qkT)
                T.gemm(K_shared, q, qkT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(lse[bz, by, k * block_N:(k + 1) * block_N], lse_shared)
                for i, j in T.Parallel(block_M, block_N):
                    qkT[i, j] = T.exp2(qkT[i, j] * scale - lse_shared[j])
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        qkT[i, j] = T.if_then_else(bx * block_M + i <= k * block_N + j,
                                                   qkT[i, j], 0)
                T.copy(dO[bz, k * block_N:(k + 1) * block_N, by, :], do)
                T.clear(dsT)
                T.gemm(V_shared, do, dsT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(qkT, qkT_cast)
                T.gemm(qkT_cast, do, dv, policy=T.GemmWarpPolicy.FullRow)

                T.copy(Delta[bz, by, k * block_N:(k + 1) * block_N], delta)
                for i, j in T.Parallel(block_M, block_N):
                    dsT_cast[i, j] = qkT[i, j] * (dsT[i, j] - delta[j]) * sm_scale
                T.gemm(dsT_cast, q, dk, policy=T.GemmWarpPolicy.FullRow)

                T.copy(dsT_cast, dsT_shared)
                T.clear(dq)
                T.gemm(dsT_shared, K_shared, dq, transpose_A=True)
                for i, j in T.Parallel(block_N, dim):
                    T.atomic_add(dQ[bz, k * block_N + i, by, j], dq[i, j])

            T.copy(dv, dV[bz, bx * block_M:(bx + 1) * block_M, by, :])
            T.copy(dk, dK[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return main


class FlashAttention:
    """The three kernels for one problem shape, with torch-style forward/backward calls."""

    def __init__(self, batch, heads, seq_len, dim, is_causal, fwd_cfg=None, bwd_cfg=None):
        args = (batch, heads, seq_len, dim)
        self.fwd = flash_fwd(*args, is_causal, **(fwd_cfg or {}))
        self.prep = bwd_preprocess(*args)
        self.bwd = flash_bwd(*args, is_causal, **(bwd_cfg or {}))

    def forward(self, q, k, v):
        return self.fwd(q, k, v)  # (O, lse)

    def backward(self, q, k, v, o, lse, do):
        delta = self.prep(o, do)
        dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
        dk, dv = torch.empty_like(k), torch.empty_like(v)
        self.bwd(q, k, v, do, lse, delta, dq, dk, dv)
        return dq.to(q.dtype), dk, dv


def ref_grads(q, k, v, do, is_causal):
    """float64 autograd through plain attention, (batch, seq, heads, dim) layout."""
    q, k, v = (x.detach().double().requires_grad_() for x in (q, k, v))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    s = qt @ kt.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), -math.inf)
    o = (torch.softmax(s, dim=-1) @ vt).transpose(1, 2)
    return (o.detach(), *torch.autograd.grad(o, (q, k, v), do.double()))


# (batch, heads, seq_len, dim, forward tiles, backward tiles)
SIZES = {
    "small": (1, 2, 200, 64, dict(), dict()),
    "medium": (2, 4, 1000, 128, dict(block_M=128, num_stages=2, threads=256),
               dict(block_N=32, num_stages=2)),
    "bench": (8, 32, 4096, 128, dict(block_M=128, num_stages=2, threads=256),
              dict(block_N=32, num_stages=2)),
}


def check(out, ref, tol):
    assert not torch.isnan(out).any(), "NaN in the output"
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < tol, f"relative error {err:.2e} exceeds {tol:.0e}"
    return err


def programs(size="bench"):
    B, H, S, D, fcfg, bcfg = SIZES[size]
    out = [("bwd_preprocess", bwd_preprocess.get_tir(B, H, S, D))]
    for c in (False, True):
        out.append((f"fwd_lse_causal{int(c)}", flash_fwd.get_tir(B, H, S, D, c, **fcfg)))
        out.append((f"bwd_causal{int(c)}", flash_bwd.get_tir(B, H, S, D, c, **bcfg)))
    return out


def run(device=None, size="small"):
    """Build the kernels (non-causal and causal), check O, dQ, dK, dV against float64 autograd
    on fresh random inputs, and return one backward case per mask:
    [{name, tilelang, baseline, baseline_name, flops, error}]."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    B, H, S, D, fcfg, bcfg = SIZES[size]
    q, k, v, do = (torch.randn(B, S, H, D, device=device, dtype=torch.float16)
                   for _ in range(4))
    cases = []
    for causal in (False, True):
        attn = FlashAttention(B, H, S, D, causal, fcfg, bcfg)
        o, lse = attn.forward(q, k, v)
        grads = attn.backward(q, k, v, o, lse, do)
        # at benchmark sizes the float64 reference is computed for one sequence and two heads
        b, h = (1, 2) if size == "bench" else (B, H)
        refs = ref_grads(*(x[:b, :, :h] for x in (q, k, v, do)), causal)
        err = max(check(x[:b, :, :h], r, tol) for x, r, tol in zip(
            (o, *grads), refs, (5e-3, 1e-2, 1e-2, 1e-2)))

        # baseline: the backward pass of torch's fused attention (its forward done once here)
        qt, kt, vt = (x.transpose(1, 2).contiguous().requires_grad_() for x in (q, k, v))
        ot = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        dot = do.transpose(1, 2).contiguous()
        baseline = (lambda ot=ot, qt=qt, kt=kt, vt=vt, dot=dot:
                    torch.autograd.grad(ot, (qt, kt, vt), dot, retain_graph=True))
        flops = 2.5 * 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)  # 5 GEMMs
        cases.append(dict(
            name=f"mha bwd fp16 B{B} H{H} S{S} D{D}{' causal' if causal else ''}",
            tilelang=lambda attn=attn, o=o, lse=lse: attn.backward(q, k, v, o, lse, do),
            baseline=baseline, baseline_name="torch SDPA backward", flops=flops, error=err))
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
