"""Programs whose warp-specialised loops hand their TMA stages back early (shared by the CPU
build tests in tests/transform/test_stage_release.py and the GPU tests in
tests/gpu/test_stage_release.py): FlashAttention forward in (batch, seq, heads, dim) layout
with one stage, and an FP8 GEMM that promotes its accumulator into a second one every few
iterations (two-level accumulation)."""

import tilelang.language as T


def flash_bshd(batch, heads, seq_len, dim, causal, block_M, block_N, num_stages, threads):
    """Online-softmax attention (base 2); keys past seq_len are masked, so any seq_len works."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    shape = [batch, seq_len, heads, dim]
    f16, f32 = "float16", "float32"

    @T.prim_func
    def main(Q: T.Tensor(shape, f16), K: T.Tensor(shape, f16), V: T.Tensor(shape, f16),
             O: T.Tensor(shape, f16)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], f16)
            k_s = T.alloc_shared([block_N, dim], f16)
            v_s = T.alloc_shared([block_N, dim], f16)
            o_s = T.alloc_shared([block_M, dim], f16)
            s = T.alloc_fragment([block_M, block_N], f32)
            p = T.alloc_fragment([block_M, block_N], f16)
            acc = T.alloc_fragment([block_M, dim], f32)
            m = T.alloc_fragment([block_M], f32)
            m_prev = T.alloc_fragment([block_M], f32)
            rescale = T.alloc_fragment([block_M], f32)
            row_sum = T.alloc_fragment([block_M], f32)
            denom = T.alloc_fragment([block_M], f32)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc, 0)
            T.fill(denom, 0)
            T.fill(m, -T.infinity(f32))
            trips = (T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                     if causal else T.ceildiv(seq_len, block_N))
            for k in T.Pipelined(trips, num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], k_s)
                for i, j in T.Parallel(block_M, block_N):
                    if causal:
                        s[i, j] = T.if_then_else(
                            (bx * block_M + i >= k * block_N + j) & (k * block_N + j < seq_len),
                            0, -T.infinity(f32))
                    else:
                        s[i, j] = T.if_then_else(k * block_N + j >= seq_len, -T.infinity(f32), 0)
                T.gemm(q_s, k_s, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    rescale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                T.reduce_sum(s, row_sum, dim=1)
                for i in T.Parallel(block_M):
                    denom[i] = denom[i] * rescale[i] + row_sum[i]
                T.copy(s, p)
                for i, j in T.Parallel(block_M, dim):
                    acc[i, j] *= rescale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], v_s)
                T.gemm(p, v_s, acc, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc[i, j] /= denom[i]
            T.copy(acc, o_s)
            T.copy(o_s, O[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return main


def fp8_two_level(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=3, interval=2,
                  dtype="float8_e4m3"):
    """C = A B^T in float32, the wgmma accumulator added into a second one (and cleared)
    every `interval` iterations and after the last."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), dtype)
            b_s = T.alloc_shared((block_N, block_K), dtype)
            c_s = T.alloc_shared((block_M, block_N), "float32")
            part = T.alloc_fragment((block_M, block_N), "float32")
            total = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(part)
            T.clear(total)
            trips = T.ceildiv(K, block_K)
            for k in T.Pipelined(trips, num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], a_s)
                T.copy(B[bx * block_N, k * block_K], b_s)
                T.gemm(a_s, b_s, part, transpose_B=True)
                if (k + 1) % interval == 0:
                    for i, j in T.Parallel(block_M, block_N):
                        total[i, j] += part[i, j]
                    T.clear(part)
            if trips % interval != 0:
                for i, j in T.Parallel(block_M, block_N):
                    total[i, j] += part[i, j]
            T.copy(total, c_s)
            T.copy(c_s, C[by * block_M, bx * block_N])

    return main
