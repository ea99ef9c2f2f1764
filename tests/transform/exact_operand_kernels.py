"""Kernels whose float32 gemm operands live in registers, filled in different ways: the
`tf32_exact_fragments` analysis (transform/analysis/exact_values.py) decides from those
writes whether the mma may take the registers unrounded. Shared by the lowering tests
(tests/transform/test_exact_values.py), the interpreter (tests/interp) and the GPU
(tests/gpu/test_tf32_exact_operands.py)."""

import tilelang
import tilelang.language as T


def converted_a(M, N, K, block_M=32, block_K=64, src="bfloat16", threads=128, fill="copy",
                swizzle=False):
    """C = A @ B^T with A (M x K, `src`) converted to a float32 fragment, B float32 (N x K)
    in shared memory, like mHC pre's gemm: `fill` is how the float32 fragment gets A's values:
    "copy" (T.copy between fragments), "parallel" (an element-wise cast), "shifted" (a cast
    plus 0.1, not a TF32 number any more), "shared32" (T.copy from a float32 shared tile);
    `swizzle` annotates A's shared tile with the swizzled layout (mHC pre does)."""

    @T.prim_func
    def k(A: T.Tensor((M, K), src), B: T.Tensor((N, K), "float32"),
          C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            As = T.alloc_shared((block_M, block_K), src)
            As32 = T.alloc_shared((block_M, block_K), "float32")
            Bs = T.alloc_shared((N, block_K), "float32")
            a_narrow = T.alloc_fragment((block_M, block_K), src)
            a32 = T.alloc_fragment((block_M, block_K), "float32")
            acc = T.alloc_fragment((block_M, N), "float32")
            if swizzle:
                T.annotate_layout({As: tilelang.layout.make_swizzled_layout(As)})
            T.clear(acc)
            for kk in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(B[0, kk * block_K], Bs)
                if fill == "shared32":
                    T.copy(A[bx * block_M, kk * block_K], As32)
                    T.copy(As32, a32)
                else:
                    T.copy(A[bx * block_M, kk * block_K], As)
                    T.copy(As, a_narrow)
                    if fill == "copy":
                        T.copy(a_narrow, a32)
                    elif fill == "parallel":
                        for i, j in T.Parallel(block_M, block_K):
                            a32[i, j] = T.cast(a_narrow[i, j], "float32")
                    else:
                        for i, j in T.Parallel(block_M, block_K):
                            a32[i, j] = T.cast(a_narrow[i, j], "float32") + 0.1
                T.gemm(a32, Bs, acc, transpose_B=True)
            T.copy(acc, C[bx * block_M, 0])
    return k


def converted_b(M, N, K, block_N=32, block_K=32, threads=128):
    """C = A @ B with A float32 in shared memory and B (K x N) int8 converted to a float32
    fragment (the mma's B operand in registers)."""

    @T.prim_func
    def k(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "int8"),
          C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            As = T.alloc_shared((M, block_K), "float32")
            b8 = T.alloc_fragment((block_K, block_N), "int8")
            b32 = T.alloc_fragment((block_K, block_N), "float32")
            acc = T.alloc_fragment((M, block_N), "float32")
            T.clear(acc)
            for kk in T.serial(T.ceildiv(K, block_K)):
                T.copy(A[0, kk * block_K], As)
                T.copy(B[kk * block_K, bx * block_N], b8)
                T.copy(b8, b32)
                T.gemm(As, b32, acc)
            T.copy(acc, C[0, bx * block_N])
    return k
