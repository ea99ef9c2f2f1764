"""Warp-specialised loops whose consumers read a TMA stage with ordinary loads (shared by the
CPU build tests in tests/transform/test_consumed_loads.py and the GPU tests in
tests/gpu/test_consumed_loads.py): an attention-backward-like step, where the row statistics
read from the stage reach a register-operand wgmma before the stage goes back, and variants
where they do not."""

import tilelang.language as T


def score_step(n, m=64, bn=64, d=64, masked=False, also_sum=False):
    """dV = sum over key tiles of exp2(K Q_k^T - L_k) @ Q_k (an attention backward's P^T dO
    with dO = Q), each block one m-row tile of K, `masked` zeroes scores above the diagonal
    (a per-tile mask), `also_sum` also adds L_k into a register accumulator that no wgmma
    reads (then the stage reads are not all consumed before the hand-back)."""

    @T.prim_func
    def main(Kt: T.Tensor((n, d), "float16"), Q: T.Tensor((n, d), "float16"),
             L: T.Tensor((n,), "float32"), dV: T.Tensor((n, d), "float32"),
             Lsum: T.Tensor((m, bn), "float32")):
        with T.Kernel(T.ceildiv(n, m), threads=128) as bx:
            k_s = T.alloc_shared((m, d), "float16")
            q_s = T.alloc_shared((bn, d), "float16")
            l_s = T.alloc_shared((bn,), "float32")
            s = T.alloc_fragment((m, bn), "float32")
            p = T.alloc_fragment((m, bn), "float16")
            acc = T.alloc_fragment((m, d), "float32")
            lsum = T.alloc_fragment((m, bn), "float32")
            T.copy(Kt[bx * m, 0], k_s)
            T.clear(acc)
            T.clear(lsum)
            for k in T.Pipelined(T.ceildiv(n, bn), num_stages=2):
                T.copy(Q[k * bn, 0], q_s)
                T.copy(L[k * bn], l_s)
                T.clear(s)
                T.gemm(k_s, q_s, s, transpose_B=True)
                for i, j in T.Parallel(m, bn):
                    s[i, j] = T.exp2(s[i, j] * 0.125 - l_s[j])
                if masked:
                    for i, j in T.Parallel(m, bn):
                        s[i, j] = T.if_then_else(bx * m + i >= k * bn + j, s[i, j], 0)
                if also_sum:
                    for i, j in T.Parallel(m, bn):
                        lsum[i, j] += l_s[j]
                T.copy(s, p)
                T.gemm(p, q_s, acc)
            T.copy(acc, dV[bx * m, 0])
            if also_sum:
                if bx == 0:
                    T.copy(lsum, Lsum)

    return main
