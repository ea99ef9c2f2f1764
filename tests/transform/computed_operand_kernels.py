"""Kernels whose wgmma operand the consumers compute in shared memory each iteration (shared by
the CPU structure tests and the GPU tests of transform/warp_specialize/computed_operands.py)."""

import tilelang.language as T


def relu_scaled_gemm(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=3, threads=256,
                     use_outside=False):
    """C = A @ (relu(B) * 0.5): B comes in by TMA, the consumers compute the gemm's operand."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), "float16")
            B_in = T.alloc_shared((block_K, block_N), "float16")
            B_shared = T.alloc_shared((block_K, block_N), "float16")
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_in)
                for i, j in T.Parallel(block_K, block_N):
                    B_shared[i, j] = T.max(B_in[i, j], T.float16(0)) * T.float16(0.5)
                T.gemm(A_shared, B_shared, C_local)
            if use_outside:  # the last computed tile is read after the loop
                for i, j in T.Parallel(block_M, block_N):
                    C_local[i, j] += T.cast(B_shared[i % block_K, j], "float32")
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def relu_scaled_a_in_registers(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=3,
                               threads=256):
    """C = (relu(A) * 0.5) @ B with the computed A in registers, the A operand of the wgmma
    (the consumers fill the fragment from the TMA-loaded tile each iteration)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_in = T.alloc_shared((block_M, block_K), "float16")
            B_shared = T.alloc_shared((block_K, block_N), "float16")
            A_local = T.alloc_fragment((block_M, block_K), "float16")
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_in)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                for i, j in T.Parallel(block_M, block_K):
                    A_local[i, j] = T.max(A_in[i, j], T.float16(0)) * T.float16(0.5)
                T.gemm(A_local, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main
