"""Kernels of the T.wgmma_gemm tests (tests/language/test_wgmma_gemm.py on the interpreter and
the sm_90a build, tests/gpu/test_wgmma_gemm_async.py on the GPU)."""

import tilelang.language as T


def wgmma_gemm_tiles(M, N, K, block_M=64, block_N=64, block_K=32, k_slices=1, wait=True,
                     threads=128, trans_B=False, acc_dtype=T.float32):
    """D = A @ B (B given N x K with trans_B) over a grid of block_M x block_N tiles, each
    issuing T.wgmma_gemm on its whole K tile or on k_slices > 1 slices of it (operands at a
    loop-dependent offset, which this compiler gives to mma.sync); out-of-range rows and
    columns of the ragged edge tiles are zero-filled by the copies and never stored."""
    b_shape = (N, K) if trans_B else (K, N)
    b_tile = (block_N, block_K) if trans_B else (block_K, block_N)
    ks = block_K // k_slices

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor(b_shape, T.float16),
             D: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), T.float16)
            B_s = T.alloc_shared(b_tile, T.float16)
            C = T.alloc_fragment((block_M, block_N), acc_dtype)
            T.clear(C)
            for ko in T.serial(T.ceildiv(K, block_K)):
                T.copy(A[by * block_M, ko * block_K], A_s)
                if trans_B:
                    T.copy(B[bx * block_N, ko * block_K], B_s)
                else:
                    T.copy(B[ko * block_K, bx * block_N], B_s)
                if k_slices == 1:
                    T.wgmma_gemm(A_s, B_s, C, transpose_B=trans_B)
                else:
                    for j in T.unroll(k_slices):
                        if trans_B:
                            T.wgmma_gemm(A_s[:, j * ks:(j + 1) * ks],
                                         B_s[:, j * ks:(j + 1) * ks], C, transpose_B=True)
                        else:
                            T.wgmma_gemm(A_s[:, j * ks:(j + 1) * ks],
                                         B_s[j * ks:(j + 1) * ks, :], C)
                if wait:
                    T.wait_wgmma(0)
            T.copy(C, D[by * block_M, bx * block_N])

    return main
