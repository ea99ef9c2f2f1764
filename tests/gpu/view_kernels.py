"""Kernels with T.reshape / T.view, shared by the CPU tests (interpreter + builds) and the GPU
tests."""

import tilelang
import tilelang.language as T


def global_view(N, M, dtype, new=None):
    cols = M if new is None else M * T.dtype(dtype).bits // T.dtype(new).bits

    @T.prim_func
    def f(A: T.Tensor((N,), dtype), B: T.Tensor((N // M, cols), new or dtype)):
        with T.Kernel(1, threads=128):
            T.copy(T.view(A, [N // M, cols], dtype=new), B)
    return f


def shared_reshape(N, M, annotate_swizzle=False):
    @T.prim_func
    def f(A: T.Tensor((N // M, M), "float16"), B: T.Tensor((N,), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((N // M, M), "float16")
            if annotate_swizzle:
                T.annotate_layout({S: tilelang.layout.make_swizzled_layout(S)})
            T.copy(A, S)
            T.copy(T.reshape(S, [N]), B)
    return f


def fragment_reshape(rows, cols, groups):
    @T.prim_func
    def f(A: T.Tensor((rows, cols), "float32"), B: T.Tensor((rows, groups), "float32")):
        with T.Kernel(1, threads=128):
            L = T.alloc_fragment((rows, cols), "float32")
            O = T.alloc_fragment((rows, groups), "float32")
            T.copy(A, L)
            R = T.reshape(L, [rows, groups, cols // groups])
            for i, g, k in T.Parallel(rows, groups, cols // groups):
                R[i, g, k] = R[i, g, k] * 2.0
            T.reduce_max(R, O, dim=2)
            T.copy(O, B)
    return f


def gemm_scores(BN=64, BQ=4, H=16, D=64):
    """A gemm accumulator seen as (BN, BQ, H) (the reference's DSA indexer idiom)."""

    @T.prim_func
    def f(Q: T.Tensor((BQ * H, D), "float16"), K: T.Tensor((BN, D), "float16"),
          W: T.Tensor((BQ, H), "float32"), O: T.Tensor((BN, BQ), "float32")):
        with T.Kernel(1, threads=128):
            q_s = T.alloc_shared((BQ * H, D), "float16")
            k_s = T.alloc_shared((BN, D), "float16")
            s = T.alloc_fragment((BN, BQ * H), "float32")
            s3 = T.reshape(s, (BN, BQ, H))
            w = T.alloc_fragment((BQ, H), "float32")
            o = T.alloc_fragment((BN, BQ), "float32")
            T.copy(Q, q_s)
            T.copy(K, k_s)
            T.copy(W, w)
            T.gemm(k_s, q_s, s, transpose_B=True, clear_accum=True)
            for n, q, h in T.Parallel(BN, BQ, H):
                s3[n, q, h] = T.max(s3[n, q, h], 0) * w[q, h]
            T.reduce_sum(s3, o, dim=-1)
            T.copy(o, O)
    return f
