"""FP8 GEMM kernels shared by the CPU (codegen) and GPU tests of the fp8 wgmma lowering."""

import tilelang.language as T


def fp8_gemm(M, N, K, block_M=128, block_N=128, block_K=128, num_stages=3, threads=128,
             a_dtype="float8_e4m3", b_dtype="float8_e4m3", out_dtype="float32",
             trans_A=False, trans_B=True, a_in_registers=False):
    """C = op(A) @ op(B) with fp32 accumulation; A is M x K (K x M with trans_A), B is N x K
    (K x N without trans_B). `a_in_registers` copies the A tile into a fragment first (the
    wgmma RS form)."""
    A_shape = (K, M) if trans_A else (M, K)
    B_shape = (N, K) if trans_B else (K, N)
    A_sh = (block_K, block_M) if trans_A else (block_M, block_K)
    B_sh = (block_N, block_K) if trans_B else (block_K, block_N)

    @T.prim_func
    def main(A: T.Tensor(A_shape, a_dtype), B: T.Tensor(B_shape, b_dtype),
             C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared(A_sh, a_dtype)
            B_shared = T.alloc_shared(B_sh, b_dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            if a_in_registers:
                A_local = T.alloc_fragment((block_M, block_K), a_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                if trans_A:
                    T.copy(A[k * block_K, by * block_M], A_shared)
                else:
                    T.copy(A[by * block_M, k * block_K], A_shared)
                if trans_B:
                    T.copy(B[bx * block_N, k * block_K], B_shared)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_shared)
                if a_in_registers:
                    T.copy(A_shared, A_local)
                    T.gemm(A_local, B_shared, C_local, transpose_B=trans_B)
                else:
                    T.gemm(A_shared, B_shared, C_local, transpose_A=trans_A,
                           transpose_B=trans_B)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main
