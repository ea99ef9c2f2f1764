"""A kernel whose fragments take nearly all of a thread's registers around an mma.sync gemm
(the GQA backward's dQ = dS^T K step, shapes scaled): CPU build tests in
tests/codegen/test_gemm_k_rolled.py, GPU tests in tests/gpu/test_gemm_k_rolled.py."""

import tilelang.language as T


def dq_step(n, m=32, d=192, kdim=128, keep=160, threads=256):
    """Out[m, d] = S^T[m, kdim] @ K[kdim, d] with S given as (kdim, m) (the gemm transposes
    it, so it runs on mma.sync), while a fragment of `keep` float32 registers per thread
    (Acc, n x d... summed over rows) stays live across it; Keep[...] = 2 * Acc after."""
    rows = keep * threads // d

    @T.prim_func
    def main(S: T.Tensor((kdim, m), "float16"), K: T.Tensor((kdim, d), "float16"),
             Acc: T.Tensor((rows, d), "float32"), Out: T.Tensor((m, d), "float32"),
             Keep: T.Tensor((rows, d), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            s_s = T.alloc_shared((kdim, m), "float16")
            k_s = T.alloc_shared((kdim, d), "float16")
            acc = T.alloc_fragment((rows, d), "float32")
            out = T.alloc_fragment((m, d), "float32")
            T.copy(Acc[0, 0], acc)
            T.copy(S[0, 0], s_s)
            T.copy(K[0, 0], k_s)
            T.gemm(s_s, k_s, out, transpose_A=True, clear_accum=True)
            for i, j in T.Parallel(rows, d):
                acc[i, j] = acc[i, j] * 2
            T.copy(out, Out[0, 0])
            T.copy(acc, Keep[0, 0])

    return main
