"""Kernels whose fragments are stored into 16-bit shared tiles (transform/partition_parallel/
stmatrix.py), shared by the build tests (tests/transform/test_stmatrix.py) and the GPU tests
(tests/gpu/test_stmatrix.py)."""

import tilelang.language as T


def gemm_staged(M, N, K, bm=64, bn=64, bk=32, threads=128, out="bfloat16", scale=None,
                via_fragment=False):
    """C = A @ B^T (or (A @ B^T) * scale), the accumulator copied whole into a shared tile
    (`T.copy`, or with `scale` a T.Parallel expression; `via_fragment`: through a 16-bit
    fragment first), then the tile to C."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"),
             C: T.Tensor((M, N), out)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            a = T.alloc_shared((bm, bk), "float16")
            b = T.alloc_shared((bn, bk), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            c_s = T.alloc_shared((bm, bn), out)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], a)
                T.copy(B[bx * bn, k * bk], b)
                T.gemm(a, b, acc, transpose_B=True)
            if via_fragment:
                low = T.alloc_fragment((bm, bn), out)
                T.copy(acc, low)
                T.copy(low, c_s)
            elif scale is None:
                T.copy(acc, c_s)
            else:
                for i, j in T.Parallel(bm, bn):
                    c_s[i, j] = T.cast(acc[i, j] * scale, out)
            T.copy(c_s, C[by * bm, bx * bn])

    return main


def gemm_half_slices(M, N, K, bm=64, bn=64, bk=32, threads=128):
    """C[:, :N] = A @ B^T and C[:, N:] = 2 (A @ B^T): the accumulator stored twice into the
    two halves of one (bm, 2 bn) shared tile (slices of a wider tile)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"),
             C: T.Tensor((M, 2 * N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            a = T.alloc_shared((bm, bk), "float16")
            b = T.alloc_shared((bn, bk), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            c_s = T.alloc_shared((bm, 2 * bn), "float16")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], a)
                T.copy(B[bx * bn, k * bk], b)
                T.gemm(a, b, acc, transpose_B=True)
            T.copy(acc, c_s[:, 0:bn])
            for i, j in T.Parallel(bm, bn):
                c_s[i, bn + j] = T.cast(acc[i, j] * 2, "float16")
            T.copy(c_s[:, 0:bn], C[by * bm, bx * bn])
            T.copy(c_s[:, bn:2 * bn], C[by * bm, N + bx * bn])

    return main


def attention_row(M, N, D, bm=64, bn=64, threads=128):
    """O = softmax(Q K^T) V for one block of rows per kernel block (no running max: N fits
    one tile): P goes through a 16-bit shared tile into the second gemm, as the sparse MLA
    kernels' S and P tiles do."""

    @T.prim_func
    def main(Q: T.Tensor((M, D), "float16"), Kt: T.Tensor((N, D), "float16"),
             V: T.Tensor((N, D), "float16"), O: T.Tensor((M, D), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=threads) as bx:
            q = T.alloc_shared((bm, D), "float16")
            k = T.alloc_shared((bn, D), "float16")
            v = T.alloc_shared((bn, D), "float16")
            s = T.alloc_fragment((bm, bn), "float32")
            p_s = T.alloc_shared((bm, bn), "float16")
            row_max = T.alloc_fragment((bm,), "float32")
            row_sum = T.alloc_fragment((bm,), "float32")
            o = T.alloc_fragment((bm, D), "float32")
            T.copy(Q[bx * bm, 0], q)
            T.copy(Kt[0, 0], k)
            T.copy(V[0, 0], v)
            T.gemm(q, k, s, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(bm, bn):
                s[i, j] = T.if_then_else(j < N, s[i, j], -T.infinity("float32"))
            T.reduce_max(s, row_max, dim=1)
            for i, j in T.Parallel(bm, bn):
                s[i, j] = T.exp(s[i, j] - row_max[i])
            T.reduce_sum(s, row_sum, dim=1)
            T.copy(s, p_s)
            T.gemm(p_s, v, o, clear_accum=True)
            for i, j in T.Parallel(bm, D):
                o[i, j] = o[i, j] / row_sum[i]
            T.copy(o, O[bx * bm, 0])

    return main
